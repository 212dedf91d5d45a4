"""`agentmesh demo`: with a mesh running (`agentmesh up`), declares a scripted coordinator and worker
(examples/coordinator-worker.yaml, applied like `agentmesh apply`), chats with the coordinator
through the gateway's StreamChat and shows every step live as it streams — the worker's too, as it
runs on an executor below the coordinator's — then the session's trace tree from memory.

Signing in needs a superuser (the demo declares agent types): `--email`/`--password` or
`AGENTMESH_EMAIL`/`AGENTMESH_PASSWORD` (for `agentmesh up`, the AGENTMESH_SUPERUSER_* it started
with), or `--token`.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import grpc
import typer
from google.protobuf import json_format
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from agentmesh.cli.apply import ApplyError, apply_manifest, read_manifest, render_changes
from agentmesh.cli.client import (
    CliError,
    Credentials,
    EmailOption,
    PasswordOption,
    RegistryOption,
    TokenOption,
    address_of,
    connect,
    describe,
    fail,
)
from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.errors import DomainError, from_rpc_error

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "coordinator-worker.yaml"
DEFAULT_AGENT = "demo/coordinator"
DEFAULT_MESSAGE = "Please process task 42."

_OUTCOMES = {
    run_pb2.DELEGATION_OUTCOME_COMPLETED: ("completed", "green"),
    run_pb2.DELEGATION_OUTCOME_REFUSED: ("refused", "red"),
    run_pb2.DELEGATION_OUTCOME_TIMEOUT: ("timed out", "red"),
    run_pb2.DELEGATION_OUTCOME_CANCELLED: ("cancelled", "yellow"),
    run_pb2.DELEGATION_OUTCOME_FAILED: ("failed", "red"),
}


@dataclass
class DemoResult:
    """How the demo's chat ended."""

    session_id: str = ""
    answer: str = ""
    completed: bool = False
    events: list[run_pb2.RunEvent] = field(default_factory=list)


class StepView:
    """The chat as it streams: one line per step, the text of each run growing on its own line,
    indented by how deep below the addressed agent it runs."""

    def __init__(self) -> None:
        self._lines: list[Text] = []
        self._text_line: dict[str, Text] = {}  # run → the line its streaming text goes on

    def render(self) -> Group:
        return Group(*self._lines)

    def _line(self, event: run_pb2.RunEvent, markup: str) -> Text:
        depth = len(event.delegation_path)
        line = Text.from_markup(f"{'    ' * depth}[bold cyan]{escape(event.agent)}[/] {markup}")
        self._lines.append(line)
        return line

    def add(self, event: run_pb2.RunEvent) -> None:
        kind = event.WhichOneof("kind")
        if kind != "text_delta":
            self._text_line.pop(event.run_id, None)
        if kind == "run_started":
            started = event.run_started
            what = ", ".join(escape(part) for part in (started.agent_kind, started.model) if part)
            where = f" on executor {escape(started.executor_id)}" if started.executor_id else ""
            self._line(event, f"[dim]starts ({what}){where}[/]")
        elif kind == "step_started":
            self._line(event, f"[dim]step {event.step_started.step}[/]")
        elif kind == "text_delta":
            line = self._text_line.get(event.run_id)
            if line is None:
                line = self._text_line[event.run_id] = self._line(event, "[white]says:[/] ")
            line.append(event.text_delta.text)
        elif kind == "tool_call":
            call = event.tool_call
            arguments = json_format.MessageToDict(call.arguments)
            self._line(
                event, f"[yellow]calls {escape(call.name)}[/]{escape(str(arguments) if arguments else '()')}"
            )
        elif kind == "tool_result":
            result = event.tool_result
            style = "red" if result.is_error else "green"
            self._line(event, f"[{style}]{escape(result.name)} →[/] {escape(result.output)}")
        elif kind == "delegation_request":
            request = event.delegation_request
            self._line(
                event, f"[magenta]delegates to {escape(request.target_agent)}:[/] {escape(request.task)}"
            )
        elif kind == "delegation_response":
            response = event.delegation_response
            word, style = _OUTCOMES.get(response.outcome, ("ended", "red"))
            target, content = escape(response.target_agent), escape(response.content)
            self._line(event, f"[magenta]← {target}[/] [{style}]{word}[/]: {content}")
        elif kind == "escalation":
            self._line(event, f"[yellow]escalates[/] {escape(event.escalation.reason)}")
        elif kind == "error":
            self._line(event, f"[red]error {escape(event.error.reason)}:[/] {escape(event.error.message)}")
        elif kind == "run_completed":
            done = event.run_completed
            usage = done.usage
            note = " [yellow](stopped at its step limit)[/]" if done.max_steps_reached else ""
            self._line(
                event,
                f"[green]answered[/] in {done.steps} step(s), "
                f"{usage.input_tokens + usage.output_tokens} tokens{note}",
            )
        elif kind == "run_failed":
            failed = event.run_failed
            self._line(event, f"[bold red]failed {escape(failed.code)}:[/] {escape(failed.message)}")


async def run_demo(
    gateway_grpc: str,
    registry: str | None,
    credentials: Credentials,
    *,
    file: Path = EXAMPLE,
    agent: str = DEFAULT_AGENT,
    message: str = DEFAULT_MESSAGE,
    console: Console | None = None,
    show_trace: bool = True,
) -> DemoResult:
    """Applies the example, chats with its coordinator showing every step live, then shows the
    session's trace. Raises CliError with a message for the terminal when something fails."""
    console = console or Console()
    try:
        manifest = read_manifest(file)
    except ApplyError as error:
        problems = "; ".join(f"{p.field}: {p.description}" for p in error.problems)
        raise CliError(f"{file} is not a valid apply file: {problems}") from None
    except OSError as error:
        raise CliError(f"cannot read {file}: {error.strerror}; pass --file") from None

    console.rule("[bold]1. the agents")
    async with connect(address_of(registry, gateway_grpc), credentials) as connection:
        try:
            changes = await apply_manifest(manifest, connection.registry, metadata=connection.metadata)
        except ApplyError as error:
            problems = "; ".join(f"{p.field}: {p.description}" for p in error.problems)
            raise CliError(f"could not set up the demo agents: {problems}") from None
        except DomainError as error:
            raise CliError(f"could not set up the demo agents: {describe(error)}") from None
        render_changes(console, changes)
        metadata = connection.metadata

    console.rule(f"[bold]2. chatting with {escape(agent)}")
    console.print(f"[bold]you:[/] {escape(message)}")
    result = DemoResult(session_id=f"demo-{uuid.uuid4().hex[:12]}")
    view = StepView()
    channel = create_channel(gateway_grpc)
    try:
        stub = gateway_service_pb2_grpc.GatewayServiceStub(channel)
        call = stub.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=agent, message=message, session_id=result.session_id),
            metadata=metadata,
        )
        with Live(view.render(), console=console, refresh_per_second=12, transient=False) as live:
            try:
                async for response in call:
                    event = response.event
                    result.events.append(event)
                    view.add(event)
                    live.update(view.render())
                    if not event.delegation_path and event.HasField("run_completed"):
                        result.completed, result.answer = True, event.run_completed.content
            except grpc.aio.AioRpcError as error:
                raise CliError(f"the chat failed: {describe(from_rpc_error(error))}") from None
            finally:
                call.cancel()
    finally:
        await channel.close()
    if result.completed:
        console.print(f"\n[bold]{escape(agent)}:[/] {escape(result.answer)}")

    if show_trace:
        console.rule("[bold]3. the session, as memory recorded it")
        await _show_trace(console, gateway_grpc, result.session_id, metadata)
    return result


async def _show_trace(console: Console, address: str, session_id: str, metadata) -> None:
    from agentmesh.cli.trace import TraceError, events_from_memory, session_tree

    token = dict(metadata).get("authorization", "").partition(" ")[2]
    try:
        events = await events_from_memory(session_id, address, token=token or None)
    except TraceError as error:
        console.print(f"[yellow]could not read the session's events ({escape(str(error))});[/]")
        console.print(f"try: agentmesh trace {session_id} --memory HOST:PORT")
        return
    console.print(session_tree(session_id, events))


GatewayGrpcOption = Annotated[
    str | None,
    typer.Option(
        "--gateway",
        envvar="AGENTMESH_GATEWAY_ADDRESS",
        show_envvar=True,
        help="gRPC host:port of the gateway. Default: the local one, 127.0.0.1:50050.",
    ),
]


def demo(
    gateway_grpc: GatewayGrpcOption = None,
    registry: RegistryOption = None,
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
    console = Console()
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        result = asyncio.run(
            run_demo(
                address_of(gateway_grpc),
                registry,
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
