"""A chat with an agent through the gateway's StreamChat, every step shown live as it streams —
tool calls, delegations and the workers' own steps too — in one session across messages. What
`agentmesh chat` (`cli/chat.py`), its prompt (`cli/prompt.py`) and `agentmesh demo` run.

A run that asks a person ends its stream with `run_suspended`; the outcome then holds what it
asks (`ChatOutcome.suspended`), and `ChatSession.respond` answers one request and streams the
resumed run the same way (`cli/asking.py` asks the person)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
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
    connect,
    describe,
    dial,
)
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
    # What the run waits for when its stream ended with `run_suspended` (in the order it asked).
    suspended: list[run_pb2.InputRequest] = field(default_factory=list)


class StepView:
    """The chat as it streams: one line per step, the text of each run growing on its own line,
    indented by how deep below the addressed agent it runs. Until the first step, a spinner
    (given one) says what it waits for."""

    def __init__(self, waiting: Spinner | None = None) -> None:
        self._lines: list[Text] = []
        self._text_line: dict[str, Text] = {}  # run → the line its streaming text goes on
        self._waiting = waiting
        self._taken = 0  # lines handed out by `take_complete`

    def render(self) -> Group:
        if not self._lines and self._waiting is not None:
            return Group(self._waiting)
        return Group(*self._lines)

    def take_complete(self, *, ended: bool = False) -> list[Text]:
        """The lines not taken yet that can no longer grow (every one, once the chat `ended`), in
        order: a run's text line grows until that run's next step."""
        end = len(self._lines)
        if not ended:
            growing = {id(line) for line in self._text_line.values()}
            end = next((i for i in range(self._taken, end) if id(self._lines[i]) in growing), end)
        taken, self._taken = self._lines[self._taken : end], end
        return taken

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
        elif kind == "input_requested":
            request = event.input_requested.request
            self._line(event, f"[bold magenta]asks a person:[/] {escape(asked_text(request))}")
        elif kind == "run_suspended":
            count = len(event.run_suspended.request_ids)
            self._line(event, f"[yellow]waits for a person ({count} request{'s' if count != 1 else ''})[/]")


def asked_text(request: run_pb2.InputRequest) -> str:
    """What a request asks, in one line: an approval's tool and arguments, or the question."""
    if request.kind == run_pb2.INPUT_KIND_APPROVAL:
        arguments = json_format.MessageToDict(request.arguments) if request.HasField("arguments") else {}
        return f"may it run {request.tool} {json.dumps(arguments, ensure_ascii=False)}?"
    return request.question


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

    def start(stub: gateway_service_pb2_grpc.GatewayServiceStub) -> Any:
        request = gateway_service_pb2.StreamChatRequest(agent=agent, message=message, session_id=session_id)
        return stub.StreamChat(request, metadata=metadata)

    try:
        return await _stream(gateway_grpc, start, f"waiting for {agent}", session_id, console)
    except grpc.aio.AioRpcError as error:
        refusal = from_rpc_error(error)
        if refusal.reason == "PROJECT_NOT_FOUND":
            project = agent.partition("/")[0]
            raise CliError(f"the chat failed: no project {project!r} that you may see") from None
        raise CliError(f"the chat failed: {describe(refusal)}") from None


async def respond_live(
    gateway_grpc: str,
    *,
    project_id: str,
    request_id: str,
    response: run_pb2.InputResponse,
    metadata: Metadata,
    console: Console,
    session_id: str = "",
) -> ChatOutcome:
    """Gives a request for input its response (GatewayService.RespondToInput) and streams the
    resumed run as a chat streams. The mesh's refusal (answered already, not found) raises as
    its DomainError; a broken stream raises CliError."""

    def start(stub: gateway_service_pb2_grpc.GatewayServiceStub) -> Any:
        request = gateway_service_pb2.RespondToInputRequest(
            project_id=project_id, id=request_id, response=response
        )
        return stub.RespondToInput(request, metadata=metadata)

    try:
        outcome = await _stream(gateway_grpc, start, "waiting for the run to resume", session_id, console)
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error) from None
    if outcome.suspended and not all(request.project_id for request in outcome.suspended):
        outcome.suspended = await _complete(gateway_grpc, project_id, outcome.suspended, metadata)
    return outcome


async def _stream(
    gateway_grpc: str,
    start: Callable[[gateway_service_pb2_grpc.GatewayServiceStub], Any],
    waiting: str,
    session_id: str,
    console: Console,
) -> ChatOutcome:
    """Reads the stream `start` opens to its end, drawing each step as it arrives; what it came
    to. An RPC error is left to the caller to word."""
    result = ChatOutcome(session_id=session_id)
    spinner = Spinner("dots", text=Text.from_markup(f"[dim]{escape(waiting)}…[/]"))
    view = StepView(spinner if console.is_terminal else None)
    asked: dict[str, run_pb2.InputRequest] = {}
    channel = dial(gateway_grpc)
    try:
        call = start(gateway_service_pb2_grpc.GatewayServiceStub(channel))
        with _shown(view, console) as show:
            try:
                async for response in call:
                    event = response.event
                    result.session_id = result.session_id or event.session_id
                    result.events.append(event)
                    view.add(event)
                    show()
                    if event.HasField("input_requested"):
                        asked[event.input_requested.request.id] = event.input_requested.request
                    if event.delegation_path:
                        continue
                    if event.HasField("run_completed"):
                        result.completed, result.answer = True, event.run_completed.content
                    elif event.HasField("run_suspended"):
                        ids = event.run_suspended.request_ids
                        # One this stream did not announce (asked before) is named by its id only.
                        result.suspended = [asked.get(id_, run_pb2.InputRequest(id=id_)) for id_ in ids]
            finally:
                call.cancel()
    finally:
        await channel.close()
    return result


async def _complete(
    gateway_grpc: str, project_id: str, requests: list[run_pb2.InputRequest], metadata: Metadata
) -> list[run_pb2.InputRequest]:
    """The requests as the registry holds them (a stream carries only what it announced)."""
    from agentmesh.registry.client import RegistryClient

    channel = dial(gateway_grpc)
    try:
        registry = RegistryClient(channel)
        return [await registry.get_input_request(project_id, r.id, metadata=metadata) for r in requests]
    finally:
        await channel.close()


@contextmanager
def _shown(view: StepView, console: Console) -> Iterator[Callable[[], None]]:
    """What shows the view after each step: on a terminal a live display, redrawn; elsewhere each
    line printed once it is complete (so a pipe reads whole lines, as they happen)."""
    if console.is_terminal:
        with Live(view.render(), console=console, refresh_per_second=12, transient=False) as live:
            yield lambda: live.update(view.render())
        return

    def print_complete(*, ended: bool = False) -> None:
        for line in view.take_complete(ended=ended):
            console.print(line)

    try:
        yield print_complete
    finally:
        print_complete(ended=True)


@dataclass
class ChatSession:
    """One conversation with an agent: each message streams in the session the first one opened."""

    gateway_grpc: str
    agent: str
    metadata: Metadata
    console: Console
    session_id: str = ""
    # The project's id, once known (a request for input names it; responding needs it).
    project_id: str = ""

    async def send(self, message: str) -> ChatOutcome:
        outcome = await stream_live(
            self.gateway_grpc,
            agent=self.agent,
            message=message,
            session_id=self.session_id,
            metadata=self.metadata,
            console=self.console,
        )
        return self._ended(outcome)

    async def respond(self, request: run_pb2.InputRequest, response: run_pb2.InputResponse) -> ChatOutcome:
        """Answers one of the run's requests and streams the resumed run (the mesh's refusal
        raises as its DomainError)."""
        outcome = await respond_live(
            self.gateway_grpc,
            project_id=request.project_id or self.project_id,
            request_id=request.id,
            response=response,
            metadata=self.metadata,
            console=self.console,
            session_id=self.session_id or request.session_id,
        )
        return self._ended(outcome)

    def _ended(self, outcome: ChatOutcome) -> ChatOutcome:
        self.session_id = outcome.session_id
        self.project_id = self.project_id or next(
            (r.project_id for r in outcome.suspended if r.project_id), ""
        )
        if outcome.completed:
            self.console.print(f"[bold]{escape(self.agent)}:[/] {escape(outcome.answer)}")
        return outcome

    def print_trace_hint(self) -> None:
        if self.session_id:
            project = self.agent.partition("/")[0]
            self.console.print(
                f"[dim]session {self.session_id} — agentmesh trace {self.session_id} "
                f"--project {escape(project)}[/]",
                soft_wrap=True,  # one line, to copy whole even from a narrow terminal
            )


async def signed_in(gateway_grpc: str, credentials: Credentials) -> Metadata:
    """Signs in (unless given a token) and returns the metadata every stream is opened with."""
    async with connect(gateway_grpc, credentials) as connection:
        return connection.metadata
