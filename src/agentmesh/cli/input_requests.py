"""`agentmesh requests | approve | deny | answer | cancel`: the requests for a person's input that suspended
runs wait for (docs/human-in-the-loop.md), listed and answered through the gateway's gRPC port,
signed in like every command.

`requests PROJECT` lists a project's requests (pending ones unless `--state` says otherwise).
`approve ID`, `deny ID` and `answer ID TEXT` give a request its one response and stream the
resumed run as `agentmesh chat` streams a run; when it asks again, a person at the terminal is
asked at once (`cli/asking.py`), otherwise the command prints how to answer and exits with 3.
`cancel ID` cancels the run that waits for the request instead (the session's waiting run, with
the runs below it), and prints the runs cancelled.
A request's id is unique in the mesh, so its project need not be named: without `--project` the
request is looked for in every project the caller may see (one lookup each; `--project` makes it
one lookup in all). Only typer and the shared options are imported up front, so `--help` is quick.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption, gateway_address
from agentmesh.cli.resources import Output

if TYPE_CHECKING:
    from agentmesh.common.v1 import run_pb2

# A request found in every visible project is looked for in this many at once.
_LOOKUPS_AT_ONCE = 16


class State(StrEnum):
    """Which requests `requests` lists."""

    pending = "pending"
    answered = "answered"
    expired = "expired"
    cancelled = "cancelled"


RequestIdArgument = Annotated[
    str, typer.Argument(help="The request's id (as `agentmesh requests` or the chat shows it).")
]
ProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        help="The request's project (slug or id). Default: looked for in every project you may see.",
    ),
]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why (the model is told it on a denial).")]


# --- requests -------------------------------------------------------------------------------------


def requests(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    session: Annotated[str, typer.Option("--session", help="Only this session's requests.")] = "",
    state: Annotated[
        State, typer.Option("--state", help="pending, answered, expired or cancelled.")
    ] = State.pending,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List a project's requests for a person's input (approvals and questions runs wait for)."""
    from agentmesh.cli.client import run_signed_in

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns

        found = await find_project(connection, project)
        listed = await _all_requests(connection, found.id, session, state)
        if output is not Output.table:
            return render_columns((), listed, output, one=False)
        if not listed:
            where = f" of session {session}" if session else ""
            return f"no {state.value} requests for input{where} in project {found.slug}"
        _print_requests(listed, state)
        return None

    run_signed_in(gateway, (email, password, token), work)


async def _all_requests(connection: Any, project_id: str, session: str, state: State) -> list[Any]:
    from agentmesh.common.v1 import run_pb2

    wanted = run_pb2.InputRequestState.Value(f"INPUT_REQUEST_STATE_{state.value.upper()}")
    found: list[Any] = []
    token = ""
    while True:
        page = await connection.registry.list_input_requests(
            project_id,
            session_id=session,
            state=wanted,
            page_size=1000,
            page_token=token,
            metadata=connection.metadata,
        )
        found.extend(page.input_requests)
        token = page.next_page_token
        if not token:
            return found


def _print_requests(listed: list[run_pb2.InputRequest], state: State) -> None:
    from agentmesh.cli.output import print_table, stdout_console
    from agentmesh.common.v1 import run_pb2

    now = datetime.now(UTC)
    last = "expires" if state is State.pending else "response"
    rows = []
    for request in listed:
        approval = request.kind == run_pb2.INPUT_KIND_APPROVAL
        asks = f"{request.tool} {_arguments(request)}" if approval else request.question
        if state is State.pending:
            tail = "in " + _span(request.expires_at.ToDatetime(UTC) - now)
        else:
            tail = _response_text(request)
        age = _span(now - request.created_at.ToDatetime(UTC)) + " ago"
        rows.append([request.id, "approval" if approval else "question", request.agent, asks, age, tail])
    print_table(stdout_console(), ("id", "kind", "agent", "asks", "age", last), rows)


def _arguments(request: run_pb2.InputRequest) -> str:
    import json

    from google.protobuf import json_format

    arguments = json_format.MessageToDict(request.arguments) if request.HasField("arguments") else {}
    return json.dumps(arguments, ensure_ascii=False)


def _response_text(request: run_pb2.InputRequest) -> str:
    from agentmesh.common.v1 import run_pb2

    response = request.response
    if request.state == run_pb2.INPUT_REQUEST_STATE_CANCELLED:
        said = "run cancelled"
    elif response.decision == run_pb2.INPUT_DECISION_APPROVE:
        said = "approved"
    elif response.decision == run_pb2.INPUT_DECISION_DENY:
        said = "declined" if request.kind == run_pb2.INPUT_KIND_QUESTION else "denied"
    else:
        said = f"answered {response.answer!r}"
    reason = f" ({response.reason})" if response.reason else ""
    return f"{said} by {response.responder or '-'}{reason}"


def _span(delta: Any) -> str:
    """A duration as people say it: 42s, 5m, 3h, 2d."""
    seconds = max(int(delta.total_seconds()), 0)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# --- approve, deny, answer -------------------------------------------------------------------------


def approve(
    request_id: RequestIdArgument,
    reason: ReasonOption = "",
    arguments: Annotated[
        str | None,
        typer.Option("--arguments", help="Run the call with these arguments instead (a JSON object)."),
    ] = None,
    project: ProjectOption = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Approve a tool call a run waits for, and follow the resumed run."""
    edited = _json_object(arguments) if arguments is not None else None
    response = _Response(decision="approve", reason=reason, arguments=edited)
    _respond(request_id, response, project, gateway, (email, password, token))


def deny(
    request_id: RequestIdArgument,
    reason: ReasonOption = "",
    project: ProjectOption = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Deny a tool call, or decline a question, a run waits for (the model is told, with the
    reason), and follow the run."""
    _respond(
        request_id, _Response(decision="deny", reason=reason), project, gateway, (email, password, token)
    )


def answer(
    request_id: RequestIdArgument,
    text: Annotated[str, typer.Argument(help="The answer.")],
    project: ProjectOption = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Answer a question a run waits for, and follow the resumed run."""
    if not text.strip():
        raise typer.BadParameter("an answer cannot be empty", param_hint="TEXT")
    _respond(request_id, _Response(answer=text), project, gateway, (email, password, token))


def cancel(
    request_id: RequestIdArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded with the runs' ends).")] = "",
    project: ProjectOption = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Cancel the run that waits for a request (the session's waiting run, and the runs below it)
    instead of answering it: each ends cancelled, and the session takes its next message."""
    from agentmesh.cli.client import run_signed_in

    async def work(connection: Any) -> str:
        found, request = await _find_request(connection, request_id, project)
        cancelled = await connection.registry.cancel_waiting_run(
            found.id, request.id, reason=reason, metadata=connection.metadata
        )
        runs = ", ".join(cancelled.run_ids)
        return (
            f"cancelled the run{'s' if len(cancelled.run_ids) != 1 else ''} waiting for {request.id}: {runs}"
        )

    run_signed_in(gateway, (email, password, token), work)


@dataclass(frozen=True)
class _Response:
    """What the person said: an approval's decision (`approve` or `deny`, with a reason and any
    edited arguments), or a question's answer."""

    decision: str = ""
    reason: str = ""
    arguments: dict[str, Any] | None = None
    answer: str = ""

    @property
    def kind(self) -> str:
        """The kind of request it responds to."""
        return "approval" if self.decision else "question"

    def message(self) -> run_pb2.InputResponse:
        from agentmesh.common.v1 import run_pb2

        message = run_pb2.InputResponse(reason=self.reason, answer=self.answer)
        if self.decision:
            message.decision = run_pb2.InputDecision.Value(f"INPUT_DECISION_{self.decision.upper()}")
        if self.arguments is not None:
            message.arguments.update(self.arguments)
        return message


def _json_object(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError as error:
        raise typer.BadParameter(f"not JSON: {error}", param_hint="--arguments") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--arguments")
    return value


def _respond(
    request_id: str,
    response: _Response,
    project: str | None,
    gateway: str | None,
    credentials: tuple[str | None, str | None, str | None],
) -> None:
    """Finds the request, checks `response` fits its kind, gives it the response, streams the
    resumed run (asking a person at the terminal when it asks again) and exits 0 when the run
    answered, 3 when it waits for a person, 1 otherwise."""
    import asyncio
    import contextlib

    from agentmesh.cli.asking import settle, show_request
    from agentmesh.cli.chat import exit_status
    from agentmesh.cli.client import CliError, Credentials, connect, describe, fail
    from agentmesh.cli.conversation import ChatSession
    from agentmesh.cli.output import stdout_console
    from agentmesh.runtime.errors import DomainError

    address = gateway_address(gateway)
    console = stdout_console()
    email, password, token = credentials
    try:
        signed = Credentials.from_options(email=email, password=password, token=token)
        with asyncio.Runner() as runner:
            stack = contextlib.AsyncExitStack()
            try:
                connection = runner.run(stack.enter_async_context(connect(address, signed)))
                found, request = runner.run(_find_request(connection, request_id, project))
            finally:
                runner.run(stack.aclose())
            if _kind(request) != response.kind and response.decision != "deny":
                what, how = (
                    (
                        "a question",
                        "answer it with `agentmesh answer ID TEXT`, or decline it with `agentmesh deny ID`",
                    )
                    if response.kind == "approval"
                    else ("an approval", "approve or deny it")
                )
                raise CliError(f"request {request_id!r} is {what}: {how}")
            label = f"{found.slug}/{request.agent}"
            chat = ChatSession(address, label, connection.metadata, console, request.session_id, found.id)
            show_request(console, request)
            outcome = runner.run(chat.respond(request, response.message()))
            outcome = settle(runner, chat, outcome, interactive=sys.stdin.isatty())
    except CliError as error:
        raise fail(str(error)) from None
    except DomainError as error:
        raise fail(describe(error)) from None
    chat.print_trace_hint()
    raise typer.Exit(exit_status(outcome))


def _kind(request: Any) -> str:
    from agentmesh.common.v1 import run_pb2

    return "approval" if request.kind == run_pb2.INPUT_KIND_APPROVAL else "question"


async def _find_request(connection: Any, request_id: str, project: str | None) -> tuple[Any, Any]:
    """The request's project and the request, from `project` or else from every project the
    caller may see. CliError naming what was not found."""
    import asyncio

    from agentmesh.cli.client import CliError
    from agentmesh.cli.resources import find_project, visible_projects
    from agentmesh.runtime.errors import InvalidArgument, NotFound

    candidates = [await find_project(connection, project)] if project else await visible_projects(connection)
    gate = asyncio.Semaphore(_LOOKUPS_AT_ONCE)

    async def look(candidate: Any) -> Any:
        async with gate:
            try:
                return await connection.registry.get_input_request(
                    candidate.id, request_id, metadata=connection.metadata
                )
            except (NotFound, InvalidArgument):
                return None

    found = await asyncio.gather(*(look(candidate) for candidate in candidates))
    for candidate, request in zip(candidates, found, strict=True):
        if request is not None:
            return candidate, request
    where = f" in project {project!r}" if project else ""
    raise CliError(f"no request for input {request_id!r}{where} that you may see")
