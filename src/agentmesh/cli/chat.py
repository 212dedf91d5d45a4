"""`agentmesh chat PROJECT/AGENT [MESSAGE]`: talk to an agent through the gateway, showing every step
live as it streams (`cli/conversation.py`).

Without MESSAGE, on a terminal, it prompts (`you> `, with line editing and a history kept across
runs) until Ctrl-D or `/exit`; Ctrl-C stops the answer being streamed and goes back to the
prompt (`cli/prompt.py`). Piped, it reads one message per line until end of input. Either way, all
in one session. Only typer and the shared options are imported up front, so `--help` is quick.

A run that asks a person (`ask_user`, a tool that needs approval) is answered inline when standard
input is a terminal (`cli/asking.py`); otherwise the command prints what it asks and how to answer
it, and exits with status 3: the run waits for whoever answers.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption, gateway_address

if TYPE_CHECKING:
    from rich.console import Console

    from agentmesh.cli.client import Credentials
    from agentmesh.cli.conversation import ChatOutcome


def chat(
    agent: Annotated[str, typer.Argument(help="The agent: project_slug/agent (its slug or name).")],
    message: Annotated[
        str | None, typer.Argument(help="What to say; without it, one message per line of input.")
    ] = None,
    session: Annotated[str, typer.Option(help="Continue this session (default: a new one).")] = "",
    gateway_grpc: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Chat with an agent, streaming every step live (without MESSAGE on a terminal: a prompt)."""
    from agentmesh.cli.client import CliError, Credentials, fail
    from agentmesh.cli.output import stdout_console

    console = stdout_console()
    if message is None and sys.stdin.isatty():
        try:
            credentials = Credentials.from_options(email=email, password=password, token=token)
        except CliError as error:
            raise fail(str(error)) from None
        from agentmesh.cli.prompt import chat_prompt

        chat_prompt(
            gateway_address(gateway_grpc), credentials, agent=agent, session_id=session, console=console
        )
        return
    messages = [message] if message is not None else [line.strip() for line in sys.stdin if line.strip()]
    if not messages:
        raise fail("nothing to say: give a MESSAGE or lines on standard input")
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        outcomes = _run_chat(
            gateway_address(gateway_grpc),
            credentials,
            agent=agent,
            messages=messages,
            session_id=session,
            console=console,
        )
    except CliError as error:
        raise fail(str(error)) from None
    raise typer.Exit(exit_status(outcomes[-1]) if all(o.completed for o in outcomes[:-1]) else 1)


def exit_status(outcome: ChatOutcome) -> int:
    """0 when the run answered, 3 (`asking.EXIT_WAITING`) when it waits for a person, else 1."""
    from agentmesh.cli.asking import EXIT_WAITING

    if outcome.completed:
        return 0
    return EXIT_WAITING if outcome.suspended else 1


def _run_chat(
    gateway_grpc: str,
    credentials: Credentials,
    *,
    agent: str,
    messages: list[str],
    session_id: str,
    console: Console,
) -> list[ChatOutcome]:
    """Sends each message in turn, in one session, answering what a run asks while a person is at
    the terminal; how each chat ended. It stops at a run left waiting: the session's turn is
    that run's until it is answered."""
    import asyncio

    from rich.markup import escape

    from agentmesh.cli.asking import settle
    from agentmesh.cli.conversation import ChatSession, signed_in

    outcomes: list[ChatOutcome] = []
    with asyncio.Runner() as runner:
        metadata = runner.run(signed_in(gateway_grpc, credentials))
        chat = ChatSession(gateway_grpc, agent, metadata, console, session_id)
        for message in messages:
            console.print(f"[bold]you:[/] {escape(message)}")
            outcome = settle(runner, chat, runner.run(chat.send(message)), interactive=sys.stdin.isatty())
            outcomes.append(outcome)
            if outcome.suspended:
                break
    chat.print_trace_hint()
    return outcomes
