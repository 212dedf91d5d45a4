"""A response read back (`GET /v1/responses/{response_id}`), from the session's log: a response id
names its run and its session (`ResponseId`), and the run's recorded events are what the response
is — nothing is stored for a response besides the log.

The run's own events tell it: its input (when, and which agent), the requests for input it made
and their answers, and its end. Ended with its answer, it is `completed` (`incomplete` at its step
limit), with the answer and the whole tree's usage its end recorded; ended with an error, `failed`
(`cancelled` when it was cancelled), with the error's reason as `code`; waiting for the client's
tools (or a person), `completed` with the calls it waits for, as the create call answered; else
`in_progress`. A run that also waits on a request of a run it delegated to reads `in_progress`:
only its own requests are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fastapi import Request
from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import asking_text
from agentmesh.gateway.errors import ModelNotFound, ResponseNotFound
from agentmesh.gateway.http.agents import resolve_agent
from agentmesh.gateway.http.client_tools import client_calls
from agentmesh.gateway.http.context import HttpContext, authorize_body
from agentmesh.gateway.http.responses_request import ResponseId
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.gateway.resume import input_request, is_final, tree_usage
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import resources_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.runtime.errors import NotFound

EventType = resources_pb2.EventType
Status = Literal["in_progress", "completed", "incomplete", "failed", "cancelled"]

# The events of a run that make its response: its input, its requests for input and their
# answers, and its end (its steps are many more, and say nothing a response shows).
_RESPONSE_EVENT_TYPES = (
    EventType.EVENT_TYPE_USER_MESSAGE,
    EventType.EVENT_TYPE_INPUT_REQUESTED,
    EventType.EVENT_TYPE_INPUT_RECEIVED,
    EventType.EVENT_TYPE_AGENT_RESPONSE,
    EventType.EVENT_TYPE_ERROR,
)


@dataclass
class RecordedResponse:
    """A response as its run's events tell it."""

    status: Status = "in_progress"
    created_at: int = 0
    agent: str = ""  # the agent's slug, as its events name it
    text: str | None = None  # the message's text; None: no message
    usage: run_pb2.Usage | None = None
    calls: list[run_pb2.InputRequest] = field(default_factory=list)
    error_code: str | None = None
    error_message: str = ""
    waiting: bool = False  # for its own requests' answers (the client's tool results, a person's)
    # The run's events it was read from (its input first), and the seq of its latest.
    events: list[resources_pb2.Event] = field(default_factory=list)
    last_seq: int = 0


@dataclass(frozen=True)
class FoundResponse:
    """A response the caller may read, with where it is."""

    at: ResponseId
    recorded: RecordedResponse
    project_id: str
    project_slug: str


def parsed_response_id(value: str) -> ResponseId:
    """The response id in a path; ResponseNotFound when it is not one."""
    at = ResponseId.of(value)
    if at is None:
        raise ResponseNotFound(value)
    return at


async def found_response(
    request: Request, ctx: HttpContext, caller: Caller, response_id: str, agent: AgentRef | None = None
) -> FoundResponse:
    """The response `response_id` names, read back: on the root route in the API key's project or
    its session's; on an agent's route (`agent`) only that agent's. ResponseNotFound for one the
    caller may not read, or another agent's."""
    at = parsed_response_id(response_id)
    if agent is None:
        project_id, project_slug = await response_project(request, ctx, caller, at)
        return FoundResponse(
            at, await read_response(ctx, caller, at, project_id=project_id), project_id, project_slug
        )
    try:
        spec = await resolve_agent(ctx, caller, agent.project_slug, agent.agent_name)
    except NotFound:
        raise ModelNotFound(str(agent)) from None
    recorded = await read_response(ctx, caller, at, project_id=spec.agent.project_id)
    if recorded.agent != spec.agent.slug:
        raise ResponseNotFound(response_id)  # another agent's, in the same project
    return FoundResponse(at, recorded, spec.agent.project_id, spec.project_slug)


async def response_project(
    request: Request, ctx: HttpContext, caller: Caller, response: ResponseId
) -> tuple[str, str]:
    """The project (id, slug) of the response's session, once the caller may read it: the API
    key's project for a key scoped to one, else the one project whose session the id names.
    ResponseNotFound otherwise — another project's response looks like none."""
    project_id = caller.project_scope
    if not project_id:
        try:
            session = await ctx.memory.get_session(response.session_id, metadata=caller.metadata)
        except NotFound:  # no session of that id, or several projects' (ambiguous)
            raise ResponseNotFound(str(response)) from None
        project_id = session.project_id
    try:
        await authorize_body(request, caller, project_id)  # the route's rule: that project's owner
        found = await ctx.call(ctx.registry.stub.GetProject, reg.GetProjectRequest(id=project_id), caller)
    except NotFound:
        raise ResponseNotFound(str(response)) from None
    return project_id, found.project.slug


async def read_response(
    ctx: HttpContext, caller: Caller, response: ResponseId, *, project_id: str
) -> RecordedResponse:
    """The response `response` names in the project's session; ResponseNotFound unless its run
    is a chat's run there."""
    listing = mem.ListEventsRequest(
        session_id=response.session_id,
        project_id=project_id,
        run_id=response.run_id,
        event_types=_RESPONSE_EVENT_TYPES,
        page_size=1000,
    )
    try:
        events = [event async for event in ctx.memory.iter_events(listing, metadata=caller.metadata)]
    except NotFound:
        events = []
    if not events or events[0].event_type != EventType.EVENT_TYPE_USER_MESSAGE:
        raise ResponseNotFound(str(response))
    return recorded_response(events)


def recorded_response(events: list[resources_pb2.Event]) -> RecordedResponse:
    """The response of a run's events (of `_RESPONSE_EVENT_TYPES`, in `seq` order, its input
    first)."""
    recorded = RecordedResponse(
        created_at=events[0].created_at.seconds, agent=events[0].agent, events=events, last_seq=events[-1].seq
    )
    pending: dict[str, run_pb2.InputRequest] = {}
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_INPUT_REQUESTED:
            request = input_request(event, [])
            pending[request.id] = request
        elif event.event_type == EventType.EVENT_TYPE_INPUT_RECEIVED:
            pending.pop(event.metadata.fields["request_id"].string_value, None)
        elif is_final(event):
            _ended(recorded, event)
            return recorded
    if pending:
        asked = sorted(pending.values(), key=lambda request: request.seq)
        recorded.status, recorded.waiting = "completed", True
        recorded.calls = client_calls(asked)
        recorded.text = asking_text(asked) or (None if recorded.calls else "")
    return recorded


def _ended(recorded: RecordedResponse, end: resources_pb2.Event) -> None:
    meta = json_format.MessageToDict(end.metadata)
    if end.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
        recorded.status = "incomplete" if meta.get("max_steps_reached") else "completed"
        recorded.text = end.content
        recorded.usage = tree_usage(meta)
        return
    code = str(meta.get("code", ""))
    recorded.status = "cancelled" if code == "CANCELLED" else "failed"
    recorded.error_code = str(meta.get("reason") or code).lower() or None
    recorded.error_message = end.content
