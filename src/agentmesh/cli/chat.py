"""`agentmesh chat PROJECT/AGENT [MESSAGE]`: talk to an agent through the gateway, showing every step
live as it streams (`cli/conversation.py`).

Without MESSAGE, on a terminal, it prompts (`you> `, with line editing and a history kept across
runs) until Ctrl-D or `/exit`; Ctrl-C stops the answer being streamed and goes back to the
prompt (`cli/prompt.py`). Piped, it reads one message per line until end of input. Either way, all
in one session. Only typer and the shared options are imported up front, so `--help` is quick.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption, gateway_address


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
    import asyncio

    from agentmesh.cli.client import CliError, Credentials, fail
    from agentmesh.cli.conversation import run_chat
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
        outcomes = asyncio.run(
            run_chat(
                gateway_address(gateway_grpc),
                credentials,
                agent=agent,
                messages=messages,
                session_id=session,
                console=console,
            )
        )
    except CliError as error:
        raise fail(str(error)) from None
    if not all(outcome.completed for outcome in outcomes):
        raise typer.Exit(1)
