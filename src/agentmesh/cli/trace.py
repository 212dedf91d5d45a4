"""`agentmesh trace SESSION_ID`: a session as a tree in the terminal — its agents' runs, their steps,
tool calls and delegations, with timings — rebuilt from the memory service's causally linked
events alone (`run_id`, `parent_event_id`, `delegation_id`).

How the tree is rebuilt: events are grouped into runs by `run_id`. A run hangs below the event
that started it — the first event's `parent_event_id` when it points into another run (a
delegated task points at its `delegation_request`), else a `delegation_request` of another run
with the same `delegation_id` — or at the top. Inside a run, events stay in `seq` order, grouped
under `step N` when their metadata names a step; a `tool_result` hangs below its `tool_call`, a
`delegation_response` below its `delegation_request`, each with the time it took.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from agentmesh.cli.options import DEFAULT_ADDRESS, EmailOption, PasswordOption, TokenOption
from agentmesh.cli.spinner import run_waiting

if TYPE_CHECKING:  # imported where used, so `agentmesh trace --help` is quick
    import grpc
    import httpx

    from agentmesh.cli.client import Credentials

Event = Mapping[str, Any]

_CONTENT_CHARS = 80
_STYLE = {
    "user_message": "bold",
    "task_delegation_received": "bold",
    "agent_response": "green",
    "tool_call": "cyan",
    "tool_result": "cyan",
    "delegation_request": "magenta",
    "delegation_response": "magenta",
    "escalation": "yellow",
    "input_requested": "magenta",
    "input_received": "magenta",
    "error": "bold red",
}


class TraceError(Exception):
    """The session could not be read; the message says why, for the terminal."""


# --- reading the events -------------------------------------------------------------------------


async def events_from_memory(
    session_id: str,
    address: str,
    *,
    token: str | None = None,
    project_id: str = "",
    page_size: int = 1000,
    jwt_secret: str | None = None,
) -> list[dict[str, Any]]:
    """Every event of the session, from the memory service's ListEvents, in `seq` order. Without
    `project_id` the session id must be unique across projects. The memory service's own port
    answers the mesh's services only: with `jwt_secret` (an operator's) the calls carry a service
    credential; without it, `address` must be a gateway (which serves the same RPCs)."""
    from agentmesh.runtime.channels import PeerSecurity, create_channel
    from agentmesh.runtime.errors import DomainError
    from agentmesh.runtime.service_identity import ServiceCredentials

    metadata = (("authorization", f"Bearer {token}"),) if token else None
    security = PeerSecurity(ServiceCredentials(jwt_secret, service="cli") if jwt_secret else None)
    async with create_channel(address, security=security) as channel:
        try:
            return await _list_events(channel, session_id, project_id, metadata, page_size)
        except DomainError as error:
            raise TraceError(f"memory service at {address}: {error.message}") from None


async def events_through_gateway(
    session_id: str, address: str, credentials: Credentials, *, project: str = "", page_size: int = 1000
) -> list[dict[str, Any]]:
    """Every event of the session through the gateway's gRPC port (which serves the memory API
    under the owner's rules), signed in like every command. `project` is the session's project,
    by slug or id (sessions are named within their project)."""
    from agentmesh.cli.client import CliError, connect
    from agentmesh.runtime.errors import DomainError, NotFound

    try:
        async with connect(address, credentials) as connection:
            project_id = ""
            if project:
                try:
                    found = await _project(connection.registry, project, connection.metadata)
                except NotFound:
                    raise TraceError(f"no project {project!r} that you may see") from None
                project_id = found.id
            try:
                return await _list_events(
                    connection.channel, session_id, project_id, connection.metadata, page_size
                )
            except NotFound:
                where = f" in project {project!r}" if project else ""
                hint = "" if project else " (name its project with --project if several use that id)"
                raise TraceError(f"no session {session_id!r}{where} that you may see{hint}") from None
            except DomainError as error:
                raise TraceError(f"the gateway at {address}: {error.message}") from None
    except CliError as error:
        raise TraceError(str(error)) from None


async def _project(registry: Any, project: str, metadata: Any) -> Any:
    """The project named by slug, else by id."""
    from agentmesh.runtime.errors import InvalidArgument, NotFound

    try:
        return await registry.get_project(slug=project, metadata=metadata)
    except (NotFound, InvalidArgument):
        return await registry.get_project(project_id=project, metadata=metadata)


async def _list_events(
    channel: grpc.aio.Channel, session_id: str, project_id: str, metadata: Any, page_size: int
) -> list[dict[str, Any]]:
    from agentmesh.memory.client import MemoryClient, event_to_dict
    from agentmesh.memory.v1 import memory_service_pb2

    request = memory_service_pb2.ListEventsRequest(
        session_id=session_id, project_id=project_id, page_size=page_size
    )
    return [
        event_to_dict(event) async for event in MemoryClient(channel).iter_events(request, metadata=metadata)
    ]


async def events_from_gateway(
    session_id: str, base_url: str, *, project_id: str, token: str, page_size: int = 1000
) -> list[dict[str, Any]]:
    """Every event of the session from the gateway's REST API (`GET /api/v1/projects/{pid}/
    sessions/{sid}/events`), page after page."""
    import httpx

    events: list[dict[str, Any]] = []
    page_token = ""
    url = f"/api/v1/projects/{project_id}/sessions/{session_id}/events"
    async with httpx.AsyncClient(
        base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=30.0
    ) as http:
        while True:
            params: dict[str, Any] = {"page_size": page_size}
            if page_token:
                params["page_token"] = page_token
            try:
                response = await http.get(url, params=params)
            except httpx.HTTPError as error:
                raise TraceError(f"gateway at {base_url}: {error}") from None
            if response.status_code != 200:
                raise TraceError(f"gateway at {base_url}: HTTP {response.status_code} {_detail(response)}")
            body = response.json()
            events.extend(body.get("events", []))
            page_token = body.get("next_page_token") or ""
            if not page_token:
                return events


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail", ""))
    except ValueError:
        return response.text[:200]


# --- rebuilding the tree ------------------------------------------------------------------------


@dataclass
class Run:
    """One run's events, in seq order, and the runs it started, keyed by the event they hang on."""

    run_id: str
    events: list[Event] = field(default_factory=list)
    children: dict[str, list[Run]] = field(default_factory=dict)

    @property
    def agent(self) -> str:
        return self.events[0].get("agent", "") if self.events else ""


def link_runs(events: Sequence[Event]) -> list[Run]:
    """The session's runs, linked into trees; returns the top-level runs in order."""
    ordered = sorted(events, key=lambda e: e.get("seq", 0))
    runs: dict[str, Run] = {}
    run_of_event: dict[str, str] = {}
    for position, event in enumerate(ordered):
        # An event without a run is a run of its own (recorded by something outside a loop).
        run_id = event.get("run_id") or f"event:{event.get('id') or position}"
        runs.setdefault(run_id, Run(run_id)).events.append(event)
        if event.get("id"):
            run_of_event[event["id"]] = run_id
    requests = {
        e["delegation_id"]: e
        for e in ordered
        if e.get("event_type") == "delegation_request" and e.get("delegation_id")
    }
    top: list[Run] = []
    for run in runs.values():
        anchor_id = _anchor_id(run, requests, run_of_event)
        if anchor_id is None:
            top.append(run)
        else:
            runs[run_of_event[anchor_id]].children.setdefault(anchor_id, []).append(run)
    # Links that loop (only in corrupt data) would hide their runs: show those at the top.
    reachable = _reachable(top)
    top.extend(run for run in runs.values() if run.run_id not in reachable)
    return top


def _anchor_id(run: Run, requests: Mapping[str, Event], run_of_event: Mapping[str, str]) -> str | None:
    """The id of the event of another run that started `run`, or None for a top-level run."""
    parent_id = run.events[0].get("parent_event_id")
    if parent_id and run_of_event.get(parent_id, run.run_id) != run.run_id:
        return parent_id
    for event in run.events:
        request_id = requests.get(event.get("delegation_id") or "", {}).get("id")
        if request_id and run_of_event.get(request_id, run.run_id) != run.run_id:
            return request_id
    return None


def _reachable(top: Sequence[Run]) -> set[str]:
    seen: set[str] = set()
    pending = list(top)
    while pending:
        run = pending.pop()
        if run.run_id not in seen:
            seen.add(run.run_id)
            pending.extend(child for children in run.children.values() for child in children)
    return seen


def session_tree(session_id: str, events: Sequence[Event]) -> Tree:
    """The session as a rich Tree: runs, steps, tool calls and delegations, with timings."""
    if not events:
        return Tree(f"[bold]session {escape(session_id)}[/] · no events")
    ordered = sorted(events, key=lambda e: e.get("seq", 0))
    start, end = _time(ordered[0]), _time(ordered[-1])
    agents = sorted({e.get("agent", "") for e in ordered if e.get("agent")})
    runs = link_runs(ordered)
    run_count = len({e.get("run_id") for e in ordered if e.get("run_id")})
    root = Tree(
        f"[bold]session {escape(session_id)}[/] · {len(ordered)} events · {run_count} runs · "
        f"agents {escape(', '.join(agents))} · {_duration(start, end)}"
    )
    for run in runs:
        _add_run(root, run, start)
    return root


def _add_run(parent: Tree, run: Run, origin: datetime | None) -> None:
    first, last = run.events[0], run.events[-1]
    run_label = run.run_id[:12] if not run.run_id.startswith("event:") else "-"
    node = parent.add(
        f"[bold blue]{escape(run.agent)}[/] run {escape(run_label)} · "
        f"{_duration(_time(first), _time(last))} · {len(run.events)} events"
    )
    nested = _nested_ids(run.events)
    steps: dict[Any, Tree] = {}
    for event in run.events:
        if event.get("id") in nested:
            continue  # shown below the event it answers
        step = (event.get("metadata") or {}).get("step")
        target = node
        if isinstance(step, int | float) and not isinstance(step, bool):
            target = steps.get(step) or steps.setdefault(step, node.add(_step_label(run.events, step)))
        event_node = target.add(_event_label(event, origin))
        for child in run.children.get(event.get("id", ""), []):
            _add_run(event_node, child, origin)
        for answer in _answers(event, run.events):
            answer_node = event_node.add(_event_label(answer, origin, since=event))
            for child in run.children.get(answer.get("id", ""), []):
                _add_run(answer_node, child, origin)


def _nested_ids(events: Sequence[Event]) -> set[str]:
    """Ids of the events shown below another event of the same run: tool results and delegation
    responses whose request is in the run."""
    ids = {e.get("id") for e in events}
    return {
        e["id"]
        for e in events
        if e.get("event_type") in ("tool_result", "delegation_response")
        and e.get("parent_event_id") in ids
        and e.get("id")
    }


def _answers(event: Event, events: Sequence[Event]) -> list[Event]:
    kind = event.get("event_type")
    if kind not in ("tool_call", "delegation_request") or not event.get("id"):
        return []
    answer = "tool_result" if kind == "tool_call" else "delegation_response"
    return [e for e in events if e.get("event_type") == answer and e.get("parent_event_id") == event["id"]]


def _step_label(events: Sequence[Event], step: Any) -> str:
    in_step = [e for e in events if (e.get("metadata") or {}).get("step") == step]
    return f"step {step} · {_duration(_time(in_step[0]), _time(in_step[-1]))}"


def _event_label(event: Event, origin: datetime | None, *, since: Event | None = None) -> str:
    kind = event.get("event_type", "?")
    style = _STYLE.get(kind, "")
    offset = _offset(origin, _time(event))
    took = f" · took {_duration(_time(since), _time(event))}" if since is not None else ""
    name = f"[{style}]{escape(kind)}[/]" if style else escape(kind)
    return f"[dim]#{event.get('seq', '?')} {offset}[/] {name}{took} {escape(_summary(event))}"


def _summary(event: Event) -> str:
    kind = event.get("event_type")
    content = _json(event.get("content", ""))
    metadata = event.get("metadata") or {}
    if kind == "delegation_request" and isinstance(content, dict):
        return f"→ {content.get('agent', '?')}: {_short(content.get('task', ''))}"
    if kind == "delegation_response" and isinstance(content, dict):
        outcome = content.get("outcome", "?")
        return f"← {content.get('agent', '?')} [{outcome}] {_short(content.get('content', ''))}"
    if kind == "tool_call":
        name = metadata.get("tool") or metadata.get("tool_name") or metadata.get("name")
        if isinstance(content, dict):
            name = name or content.get("name")
            arguments = content.get("arguments", content)
        else:
            arguments = content
        return (
            f"{name or '?'}({_short(json.dumps(arguments) if not isinstance(arguments, str) else arguments)})"
        )
    if kind == "error":
        reason = metadata.get("reason")
        return f"{reason}: {_short(content)}" if reason else _short(content)
    return _short(content)


def _json(content: Any) -> Any:
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = " ".join(text.split())
    return text if len(text) <= _CONTENT_CHARS else text[: _CONTENT_CHARS - 1] + "…"


def _time(event: Event) -> datetime | None:
    value = event.get("created_at")
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _duration(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "?"
    seconds = max((end - start).total_seconds(), 0.0)
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _offset(origin: datetime | None, moment: datetime | None) -> str:
    if origin is None or moment is None:
        return ""
    return f"+{max((moment - origin).total_seconds(), 0.0):.3f}s"


# --- the command --------------------------------------------------------------------------------


def trace(
    session_id: Annotated[str, typer.Argument(help="The session to show.")],
    project: Annotated[
        str | None,
        typer.Option(help="The session's project, by slug or id (needed when several projects use its id)."),
    ] = None,
    gateway: Annotated[
        str | None,
        typer.Option(
            help=f"The gateway: gRPC host:port (default {DEFAULT_ADDRESS}), or its HTTP base URL "
            "(REST; then --project is the project's id).",
            envvar="AGENTMESH_GATEWAY_ADDRESS",
            show_envvar=True,
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            help="host:port of the memory service (gRPC), instead of the gateway (operators; needs a token).",
            envvar="AGENTMESH_MEMORY_ADDRESS",
        ),
    ] = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
    jwt_secret: Annotated[
        str | None,
        typer.Option(
            help="The mesh's secret, with --memory: the memory service answers the mesh's services only.",
            envvar="AGENTMESH_JWT_SECRET",
            show_default=False,
        ),
    ] = None,
    width: Annotated[int | None, typer.Option(help="Terminal width to render for.")] = None,
) -> None:
    """Show a session as a tree: agents, runs, steps, tool calls and delegations, with timings."""
    from agentmesh.cli.client import CliError, Credentials
    from agentmesh.cli.output import stdout_console

    console = Console(width=width) if width else stdout_console()
    try:
        if memory:
            events = run_waiting(
                events_from_memory(
                    session_id, memory, token=token, project_id=project or "", jwt_secret=jwt_secret
                )
            )
        elif gateway and gateway.startswith(("http://", "https://")):
            if not project or not token:
                raise typer.BadParameter(
                    "a REST --gateway URL needs --project ID and --token (or AGENTMESH_TOKEN)"
                )
            events = run_waiting(events_from_gateway(session_id, gateway, project_id=project, token=token))
        else:
            credentials = Credentials.from_options(email=email, password=password, token=token)
            events = run_waiting(
                events_through_gateway(
                    session_id, gateway or DEFAULT_ADDRESS, credentials, project=project or ""
                )
            )
    except (TraceError, CliError) as error:
        typer.echo(f"agentmesh trace: {error}", err=True)
        raise typer.Exit(1) from None
    console.print(session_tree(session_id, events))
