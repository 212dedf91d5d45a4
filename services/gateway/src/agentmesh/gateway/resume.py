"""Resuming a chat's stream from the session's log (DESIGN §4-5: a client whose stream broke —
the gateway or the executor died, the network dropped — picks it up by the last `seq` it saw).

The log is the truth: every step a run records has its `seq`, so the events after the client's
`after_seq` are exactly what it missed, once each. They are read with `WatchEvents(after_seq)`
— the session's recorded events and then the live ones — turned back into the RunEvents the
stream carries, and the stream ends with the followed run's final event (its `agent_response`
or the `error` it failed with, recorder.end_key), or at once when that is at or before
`after_seq`. What is not recorded is not replayed: text deltas (the answer arrives whole in
`run_completed`) and `step_started`.

A run that suspends to wait for a person records its requests (`input_requested`, the last of
them marked `last`) and no end: the followed run's stream then ends with `run_suspended`, once
the run did something since `after_seq` (a follower that starts at a request of the suspension
it is answering skips that suspension's other requests).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.client import Metadata

EventType = resources_pb2.EventType
Outcome = run_pb2.DelegationOutcome
# A run's input: a user's message (a chat's, or a workflow's sub-agent's), or a delegated task.
INPUTS = (EventType.EVENT_TYPE_USER_MESSAGE, EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED)
# A request's kind as its `input_requested` event names it.
_INPUT_KINDS = {"question": run_pb2.INPUT_KIND_QUESTION, "client_tool": run_pb2.INPUT_KIND_CLIENT_TOOL}


def is_final(event: resources_pb2.Event) -> bool:
    """A run's final event: its answer, or the error it failed or was cancelled with (those carry
    a status `code`; an error the run recovers from does not)."""
    if event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
        return True
    return event.event_type == EventType.EVENT_TYPE_ERROR and "code" in event.metadata.fields


async def follow_run(
    memory: MemoryClient,
    session_id: str,
    *,
    project_id: str,
    after_seq: int,
    run_id: str,
    metadata: Metadata,
    parked: Callable[[list[str]], Awaitable[None]] | None = None,
    to_top: bool = False,
) -> AsyncIterator[run_pb2.RunEvent]:
    """The session's events after `after_seq` as RunEvents, until `run_id`'s final event (the
    session's latest chat's run when empty), or its suspension. Sessions are named within their
    project. `parked` waits until the registry holds a suspension's requests: the run records
    them in the log before it parks, and a client told `run_suspended` may answer them at once.
    `to_top`: follow the top-level run above `run_id` instead (a delegated run's request was
    answered: the stream is its top-level caller's, to that one's end)."""
    inputs = await _inputs(memory, session_id, project_id=project_id, metadata=metadata)
    if not run_id:
        chats = [event for event in inputs if event.event_type == EventType.EVENT_TYPE_USER_MESSAGE]
        if not chats:
            return
        run_id = chats[-1].run_id
    if to_top:
        run_id = top_run(run_id, callers_of(inputs))
    ended = [
        event
        async for event in memory.iter_events(
            mem.ListEventsRequest(
                session_id=session_id, project_id=project_id, run_id=run_id, page_size=1000
            ),
            metadata=metadata,
        )
        if is_final(event) and event.seq <= after_seq
    ]
    if ended:
        return  # the client saw the end already
    paths = {event.run_id: _path(event) for event in inputs}
    # The followed run and the runs below it (delegated, sub-agents): a request of any of them
    # suspends them all, each waiting on the one below.
    tree = tree_of(run_id, callers_of(inputs))
    moved = False  # the followed runs recorded something other than a request since after_seq
    asked: list[str] = []  # their requests since they last did something else
    async for event in memory.watch_events(session_id, after_seq, project_id=project_id, metadata=metadata):
        if event.event_type == EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED:
            paths[event.run_id] = _path(event)
        if event.event_type in INPUTS and _caller(event) in tree:
            tree.add(event.run_id)
        converted = run_event(event, paths.get(event.run_id, []))
        if event.run_id in tree and event.event_type == EventType.EVENT_TYPE_INPUT_REQUESTED:
            if not moved:
                continue  # a request of the suspension the follower comes from
            asked.append(converted.input_requested.request.id if converted else "")
        elif event.run_id in tree:
            moved, asked = True, []
        if converted is not None:
            yield converted
        if event.run_id == run_id and is_final(event):
            return
        if asked and event.metadata.fields["last"].bool_value if "last" in event.metadata.fields else False:
            if parked is not None:
                await parked(asked)
            # The followed run's suspension, whichever run of its tree asked.
            followed = next((input_ for input_ in inputs if input_.run_id == run_id), event)
            yield suspended_event(followed, asked, paths.get(followed.run_id, []))
            return


async def _inputs(
    memory: MemoryClient, session_id: str, *, project_id: str, metadata: Metadata
) -> list[resources_pb2.Event]:
    """The session's runs' inputs: a user's message or a delegated task, each naming its caller."""
    request = mem.ListEventsRequest(
        session_id=session_id, project_id=project_id, event_types=list(INPUTS), page_size=1000
    )
    return [event async for event in memory.iter_events(request, metadata=metadata)]


async def top_run_of(
    memory: MemoryClient, session_id: str, run_id: str, *, project_id: str, metadata: Metadata
) -> str:
    """The top-level run above the session's run `run_id` (itself when it has no caller)."""
    inputs = await _inputs(memory, session_id, project_id=project_id, metadata=metadata)
    return top_run(run_id, callers_of(inputs))


def top_run(run_id: str, callers: dict[str, str]) -> str:
    """The top-level run above `run_id` (itself when it has no caller): whose stream a request of
    a delegated run belongs to. `callers`: each run's caller's run id, from its input."""
    seen = {run_id}
    while callers.get(run_id) and callers[run_id] not in seen:
        run_id = callers[run_id]
        seen.add(run_id)
    return run_id


def tree_of(run_id: str, callers: dict[str, str]) -> set[str]:
    """`run_id` and every run below it."""
    tree = {run_id}
    grown = True
    while grown:
        below = {run for run, caller in callers.items() if caller in tree} - tree
        tree |= below
        grown = bool(below)
    return tree


def callers_of(inputs: Iterable[resources_pb2.Event]) -> dict[str, str]:
    """Each run's caller's run id ("" for a top-level run), from the runs' inputs."""
    return {event.run_id: _caller(event) for event in inputs if event.event_type in INPUTS}


def _caller(event: resources_pb2.Event) -> str:
    meta = event.metadata.fields
    return meta["caller_run_id"].string_value if "caller_run_id" in meta else ""


def tree_usage(metadata: dict[str, Any]) -> run_pb2.Usage:
    """What a run and everything it delegated used, as its answer's event records it
    (`tree_usage`; a Struct's numbers read back as floats): a follower's `run_completed` carries
    it as the streamed one does."""
    tree = metadata.get("tree_usage") or {}
    cost = tree.get("cost")
    return run_pb2.Usage(
        input_tokens=int(tree.get("input_tokens", 0)),
        output_tokens=int(tree.get("output_tokens", 0)),
        cached_input_tokens=int(tree.get("cached_input_tokens", 0)),
        cost=float(cost) if cost is not None else 0.0,
        cost_known=cost is not None,
        unpriced_models=[str(model) for model in tree.get("unpriced_models") or []],
    )


def run_event(event: resources_pb2.Event, path: list[str]) -> run_pb2.RunEvent | None:
    """The RunEvent a recorded event stands for."""
    out = run_pb2.RunEvent(
        run_id=event.run_id,
        session_id=event.session_id,
        agent=event.agent,
        delegation_path=path,
        seq=event.seq,
    )
    meta = json_format.MessageToDict(event.metadata)
    kind = event.event_type
    if kind in (EventType.EVENT_TYPE_USER_MESSAGE, EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED):
        out.run_started.SetInParent()
    elif kind == EventType.EVENT_TYPE_AGENT_RESPONSE:
        out.run_completed.content = event.content
        out.run_completed.steps = int(meta.get("steps", 0))
        out.run_completed.max_steps_reached = bool(meta.get("max_steps_reached", False))
        out.run_completed.escalated = bool(meta.get("escalated", False))
        out.run_completed.usage.CopyFrom(tree_usage(meta))
    elif kind == EventType.EVENT_TYPE_TOOL_CALL:
        body = json_content(event.content)
        out.tool_call.call_id = str(meta.get("call_id", ""))
        out.tool_call.name = str(body.get("name", ""))
        out.tool_call.arguments.update(body.get("arguments") or {})
    elif kind == EventType.EVENT_TYPE_TOOL_RESULT:
        out.tool_result.call_id = str(meta.get("call_id", ""))
        out.tool_result.name = str(meta.get("tool", ""))
        out.tool_result.output = event.content
        out.tool_result.is_error = bool(meta.get("is_error", False))
    elif kind == EventType.EVENT_TYPE_DELEGATION_REQUEST:
        body = json_content(event.content)
        out.delegation_request.delegation_id = event.delegation_id
        out.delegation_request.target_agent = str(body.get("agent", ""))
        out.delegation_request.task = str(body.get("task", ""))
    elif kind == EventType.EVENT_TYPE_DELEGATION_RESPONSE:
        body = json_content(event.content)
        out.delegation_response.delegation_id = event.delegation_id
        out.delegation_response.target_agent = str(body.get("agent", ""))
        out.delegation_response.outcome = _outcome(str(body.get("outcome", "")))
        out.delegation_response.content = str(body.get("content", ""))
    elif kind == EventType.EVENT_TYPE_ESCALATION:
        out.escalation.reason = event.content
    elif kind == EventType.EVENT_TYPE_INPUT_REQUESTED:
        out.input_requested.request.CopyFrom(input_request(event, path))
    elif kind == EventType.EVENT_TYPE_ERROR and "code" in meta:
        out.run_failed.code = str(meta["code"])
        out.run_failed.message = event.content
    elif kind == EventType.EVENT_TYPE_ERROR:
        out.error.reason = str(meta.get("reason", ""))
        out.error.message = event.content
    else:
        return None
    return out


def input_request(event: resources_pb2.Event, path: list[str]) -> run_pb2.InputRequest:
    """The request an `input_requested` event recorded (pending, as it was raised)."""
    body = json_content(event.content)
    meta = json_format.MessageToDict(event.metadata)
    request = run_pb2.InputRequest(
        id=str(body.get("request_id", "")),
        session_id=event.session_id,
        run_id=event.run_id,
        agent=event.agent,
        delegation_path=[str(step) for step in body.get("delegation_path") or path],
        kind=_INPUT_KINDS.get(str(body.get("kind")), run_pb2.INPUT_KIND_APPROVAL),
        tool=str(body.get("tool", "")),
        question=str(body.get("question", "")),
        call_id=str(meta.get("call_id", "")),
        state=run_pb2.INPUT_REQUEST_STATE_PENDING,
        seq=event.seq,
    )
    arguments = body.get("arguments")
    if isinstance(arguments, dict):
        request.arguments.update(arguments)
    request.created_at.CopyFrom(event.created_at)
    if body.get("expires_at"):
        request.expires_at.FromJsonString(str(body["expires_at"]))
    return request


def suspended_event(event: resources_pb2.Event, request_ids: list[str], path: list[str]) -> run_pb2.RunEvent:
    """The `run_suspended` that ends a followed run's stream at its last request; `event`: one of
    the followed run's (its input)."""
    return run_pb2.RunEvent(
        run_id=event.run_id,
        session_id=event.session_id,
        agent=event.agent,
        delegation_path=path,
        run_suspended=run_pb2.RunSuspended(request_ids=request_ids),
    )


def _path(event: resources_pb2.Event) -> list[str]:
    path = json_format.MessageToDict(event.metadata).get("delegation_path") or []
    return [str(step) for step in path]


def json_content(content: str) -> dict[str, Any]:
    """A recorded event's JSON content as a dict (empty when it is not a JSON object)."""
    try:
        value = json.loads(content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _outcome(name: str) -> Outcome.ValueType:
    try:
        return Outcome.Value(f"DELEGATION_OUTCOME_{name.upper()}")
    except ValueError:
        return Outcome.DELEGATION_OUTCOME_UNSPECIFIED


async def still_waiting(
    answered: run_pb2.InputRequest, pending: list[run_pb2.InputRequest]
) -> AsyncIterator[run_pb2.RunEvent]:
    """The stream of a response after which the run still waits for its other requests: those
    requests again, and `run_suspended`."""
    for request in pending:
        yield run_pb2.RunEvent(
            run_id=request.run_id,
            session_id=request.session_id,
            agent=request.agent,
            delegation_path=request.delegation_path,
            seq=request.seq,
            input_requested=run_pb2.InputRequested(request=request),
        )
    yield run_pb2.RunEvent(
        run_id=answered.run_id,
        session_id=answered.session_id,
        agent=answered.agent,
        delegation_path=answered.delegation_path,
        run_suspended=run_pb2.RunSuspended(request_ids=[request.id for request in pending]),
    )
