"""`agentmesh chat PROJECT/AGENT` on a terminal: a prompt, one session, until Ctrl-D or `/exit`.

The prompt is read in the main thread between chats (GNU readline through `input`: line editing,
and a history kept in the CLI's config folder, readable by its user only, since chats may hold
anything). One event loop (`asyncio.Runner`) lives across messages, so the connection and its
sign-in are made once. Ctrl-C while an answer streams cancels that chat (the gateway cancels the
run) and returns to the prompt; Ctrl-C at the prompt clears the line, as in a shell. A run that
asks a person is answered at its own prompt (`cli/asking.py`) before `you> ` comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from agentmesh.cli.client import CliError, Credentials, connect
from agentmesh.cli.login import config_dir

PROMPT = "you> "
EXIT_WORDS = frozenset({"/exit", "/quit"})
HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000


def chat_prompt(
    gateway_grpc: str, credentials: Credentials, *, agent: str, session_id: str, console: Console
) -> None:
    from agentmesh.cli.asking import settle
    from agentmesh.cli.conversation import ChatSession

    console.print(f"[dim]chatting with {escape(agent)} — Ctrl-D or /exit to leave[/]")
    with asyncio.Runner() as runner, _history():
        stack = contextlib.AsyncExitStack()
        try:
            connection = runner.run(stack.enter_async_context(connect(gateway_grpc, credentials)))
        except CliError as error:
            console.print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)
            raise SystemExit(1) from None
        chat = ChatSession(gateway_grpc, agent, connection.metadata, console, session_id)
        try:
            for line in _lines(console):
                try:
                    settle(runner, chat, runner.run(chat.send(line)), interactive=True)
                except KeyboardInterrupt:
                    console.print("[yellow]stopped[/]")
                except CliError as error:
                    console.print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)
        finally:
            runner.run(stack.aclose())
    chat.print_trace_hint()


def _lines(console: Console) -> Iterator[str]:
    """What the user types, line by line, until end of input or an exit word."""
    while True:
        try:
            line = input(PROMPT).strip()
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print()
            continue
        if line in EXIT_WORDS:
            return
        if line:
            yield line


@contextlib.contextmanager
def _history() -> Iterator[None]:
    """Line editing and the prompt's history, read at the start and written at the end."""
    try:
        import readline
    except ImportError:  # no GNU readline on this platform: a plain prompt
        yield
        return
    path = config_dir() / HISTORY_FILE
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        _write_history(readline, path)


def _write_history(readline: object, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch(mode=0o600, exist_ok=True)
        os.chmod(path, 0o600)
        readline.write_history_file(path)  # type: ignore[attr-defined]
    except OSError:
        pass  # a history that cannot be kept is no reason to fail the chat
