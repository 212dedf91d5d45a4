"""`agentmesh demo`: with a mesh running (`agentmesh up`), declares a scripted coordinator and worker
(examples/coordinator-worker.yaml, applied like `agentmesh apply`), chats with the coordinator
through the gateway's StreamChat and shows every step live as it streams — the worker's too, as it
runs on an executor below the coordinator's — then the session's trace tree from memory.

Signing in needs a superuser (the demo declares agent types): `--email`/`--password` or
`AGENTMESH_EMAIL`/`AGENTMESH_PASSWORD`, `--token`, or the login `agentmesh login` kept. Only typer
and the shared options are imported up front, so `--help` is quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentmesh.cli.options import (
    EmailOption,
    GatewayOption,
    PasswordOption,
    RegistryAliasOption,
    TokenOption,
    gateway_address,
)

if TYPE_CHECKING:
    from rich.console import Console

    from agentmesh.cli.client import Credentials
    from agentmesh.cli.conversation import ChatOutcome

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "coordinator-worker.yaml"
DEFAULT_AGENT = "demo/coordinator"
DEFAULT_MESSAGE = "Please process task 42."


async def run_demo(
    gateway_grpc: str,
    credentials: Credentials,
    *,
    file: Path = EXAMPLE,
    agent: str = DEFAULT_AGENT,
    message: str = DEFAULT_MESSAGE,
    console: Console | None = None,
    show_trace: bool = True,
) -> ChatOutcome:
    """Applies the example, chats with its coordinator showing every step live, then shows the
    session's trace. Raises CliError with a message for the terminal when something fails."""
    import uuid

    from rich.markup import escape

    from agentmesh.cli.apply.document import ApplyError, read_manifest
    from agentmesh.cli.apply.execute import apply_manifest
    from agentmesh.cli.apply.render import render_changes
    from agentmesh.cli.client import CliError, connect, describe
    from agentmesh.cli.conversation import stream_live
    from agentmesh.cli.output import print_heading, stdout_console
    from agentmesh.runtime.errors import DomainError

    console = console or stdout_console()
    try:
        manifest = read_manifest(file)
    except ApplyError as error:
        problems = "; ".join(f"{p.field}: {p.description}" for p in error.problems)
        raise CliError(f"{file} is not a valid apply file: {problems}") from None
    except OSError as error:
        raise CliError(f"cannot read {file}: {error.strerror}; pass --file") from None

    print_heading(console, "1. the agents")
    async with connect(gateway_grpc, credentials) as connection:
        try:
            changes = await apply_manifest(manifest, connection.registry, metadata=connection.metadata)
        except ApplyError as error:
            problems = "; ".join(f"{p.field}: {p.description}" for p in error.problems)
            raise CliError(f"could not set up the demo agents: {problems}") from None
        except DomainError as error:
            raise CliError(f"could not set up the demo agents: {describe(error)}") from None
        render_changes(console, changes)
        metadata = connection.metadata

    print_heading(console, f"2. chatting with {escape(agent)}")
    console.print(f"[bold]you:[/] {escape(message)}")
    result = await stream_live(
        gateway_grpc,
        agent=agent,
        message=message,
        session_id=f"demo-{uuid.uuid4().hex[:12]}",
        metadata=metadata,
        console=console,
    )
    if result.completed:
        console.print(f"\n[bold]{escape(agent)}:[/] {escape(result.answer)}")

    if show_trace:
        print_heading(console, "3. the session, as memory recorded it")
        await _show_trace(console, gateway_grpc, result.session_id, metadata, project=agent.partition("/")[0])
    return result


async def _show_trace(console: Console, address: str, session_id: str, metadata, *, project: str) -> None:
    from rich.markup import escape

    from agentmesh.cli.trace import TraceError, events_from_memory, session_tree

    token = dict(metadata).get("authorization", "").partition(" ")[2]
    try:
        events = await events_from_memory(session_id, address, token=token or None)
    except TraceError as error:
        console.print(f"[yellow]could not read the session's events ({escape(str(error))});[/]")
        console.print(f"try: agentmesh trace {session_id} --project {escape(project)}")
        return
    console.print(session_tree(session_id, events))


def demo(
    gateway_grpc: GatewayOption = None,
    registry: RegistryAliasOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The coordinator/worker setup to apply.")
    ] = EXAMPLE,
    agent: Annotated[
        str, typer.Option(help="The agent to chat with, project_slug/agent_name.")
    ] = DEFAULT_AGENT,
    message: Annotated[str, typer.Option(help="What to ask it.")] = DEFAULT_MESSAGE,
) -> None:
    """Run a scripted coordinator/worker delegation end to end against a running mesh, showing each
    step live, then the session's trace."""
    import asyncio

    from agentmesh.cli.client import CliError, Credentials, fail
    from agentmesh.cli.output import stdout_console

    console = stdout_console()
    address = gateway_address(gateway_grpc, registry)
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        result = asyncio.run(
            run_demo(
                address,
                credentials,
                file=file,
                agent=agent,
                message=message,
                console=console,
            )
        )
    except CliError as error:
        raise fail(str(error)) from None
    if not result.completed:
        raise typer.Exit(1)
