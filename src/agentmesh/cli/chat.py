"""`agentmesh chat PROJECT/AGENT [MESSAGE]`: talk to an agent through the gateway's StreamChat,
showing every step live as it streams — tool calls, delegations and the workers' own steps too.

Without MESSAGE, on a terminal, it prompts (`you> `, with line editing and a history kept across
runs) until Ctrl-D or `/exit`; Ctrl-C stops the answer being streamed and goes back to the
prompt. Piped, it reads one message per line until end of input. Either way, all in one session.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Annotated

import grpc
import typer
from google.protobuf import json_format
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.text import Text

from agentmesh.cli.client import (
    CliError,
    Credentials,
    Metadata,
    address_of,
    connect,
    describe,
    dial,
    fail,
)
from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.runtime.errors import from_rpc_error

_OUTCOMES = {
    run_pb2.DELEGATION_OUTCOME_COMPLETED: ("completed", "green"),
    run_pb2.DELEGATION_OUTCOME_REFUSED: ("refused", "red"),
    run_pb2.DELEGATION_OUTCOME_TIMEOUT: ("timed out", "red"),
    run_pb2.DELEGATION_OUTCOME_CANCELLED: ("cancelled", "yellow"),
    run_pb2.DELEGATION_OUTCOME_FAILED: ("failed", "red"),
}


@dataclass
class ChatOutcome:
    """How a streamed chat ended."""

    session_id: str = ""
    answer: str = ""
    completed: bool = False
    events: list[run_pb2.RunEvent] = field(default_factory=list)


class StepView:
    """The chat as it streams: one line per step, the text of each run growing on its own line,
    indented by how deep below the addressed agent it runs. Until the first step, a spinner
    (given one) says what it waits for."""

    def __init__(self, waiting: Spinner | None = None) -> None:
        self._lines: list[Text] = []
        self._text_line: dict[str, Text] = {}  # run → the line its streaming text goes on
        self._waiting = waiting

    def render(self) -> Group:
        if not self._lines and self._waiting is not None:
            return Group(self._waiting)
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


async def stream_live(
    gateway_grpc: str,
    *,
    agent: str,
    message: str,
    session_id: str,
    metadata: Metadata,
    console: Console,
) -> ChatOutcome:
    """Streams one chat, drawing each step as it arrives. Raises CliError when the chat fails."""
    result = ChatOutcome(session_id=session_id)
    waiting = f"[dim]waiting for {escape(agent)}…[/]"
    view = StepView(Spinner("dots", text=Text.from_markup(waiting)) if console.is_terminal else None)
    channel = dial(gateway_grpc)
    try:
        stub = gateway_service_pb2_grpc.GatewayServiceStub(channel)
        call = stub.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=agent, message=message, session_id=session_id),
            metadata=metadata,
        )
        with Live(view.render(), console=console, refresh_per_second=12, transient=False) as live:
            try:
                async for response in call:
                    event = response.event
                    result.session_id = result.session_id or event.session_id
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
    return result


@dataclass
class ChatSession:
    """One conversation with an agent: each message streams in the session the first one opened."""

    gateway_grpc: str
    agent: str
    metadata: Metadata
    console: Console
    session_id: str = ""

    async def send(self, message: str) -> ChatOutcome:
        outcome = await stream_live(
            self.gateway_grpc,
            agent=self.agent,
            message=message,
            session_id=self.session_id,
            metadata=self.metadata,
            console=self.console,
        )
        self.session_id = outcome.session_id
        if outcome.completed:
            self.console.print(f"[bold]{escape(self.agent)}:[/] {escape(outcome.answer)}")
        return outcome

    def print_trace_hint(self) -> None:
        if self.session_id:
            project = self.agent.partition("/")[0]
            self.console.print(
                f"[dim]session {self.session_id} — agentmesh trace {self.session_id} "
                f"--project {escape(project)}[/]"
            )


async def run_chat(
    gateway_grpc: str,
    credentials: Credentials,
    *,
    agent: str,
    messages: list[str],
    session_id: str = "",
    console: Console,
) -> list[ChatOutcome]:
    """Sends each message in turn, in one session; returns how each chat ended."""
    outcomes: list[ChatOutcome] = []
    async with connect(gateway_grpc, credentials) as connection:
        chat = ChatSession(gateway_grpc, agent, connection.metadata, console, session_id)
        for message in messages:
            console.print(f"[bold]you:[/] {escape(message)}")
            outcomes.append(await chat.send(message))
    chat.print_trace_hint()
    return outcomes


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
    console = Console()
    if message is None and sys.stdin.isatty():
        try:
            credentials = Credentials.from_options(email=email, password=password, token=token)
        except CliError as error:
            raise fail(str(error)) from None
        from agentmesh.cli.prompt import chat_prompt

        chat_prompt(address_of(gateway_grpc), credentials, agent=agent, session_id=session, console=console)
        return
    messages = [message] if message is not None else [line.strip() for line in sys.stdin if line.strip()]
    if not messages:
        raise fail("nothing to say: give a MESSAGE or lines on standard input")
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        outcomes = asyncio.run(
            run_chat(
                address_of(gateway_grpc),
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
