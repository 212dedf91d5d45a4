"""Resuming a chat's stream from the session's log (DESIGN §4-5: a client whose stream broke —
the gateway or the executor died, the network dropped — picks it up by the last `seq` it saw).

The log is the truth: every step a run records has its `seq`, so the events after the client's
`after_seq` are exactly what it missed, once each. They are read with `WatchEvents(after_seq)`
— the session's recorded events and then the live ones — turned back into the RunEvents the
stream carries, and the stream ends with the followed run's final event (its `agent_response`
or the `error` it failed with, recorder.end_key), or at once when that is at or before
`after_seq`. What is not recorded is not replayed: text deltas (the answer arrives whole in
`run_completed`) and `step_started`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.client import Metadata

EventType = resources_pb2.EventType
Outcome = run_pb2.DelegationOutcome


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
) -> AsyncIterator[run_pb2.RunEvent]:
    """The session's events after `after_seq` as RunEvents, until `run_id`'s final event (the
    session's latest chat's run when empty). Sessions are named within their project."""
    inputs = [
        event
        async for event in memory.iter_events(
            mem.ListEventsRequest(
                session_id=session_id,
                project_id=project_id,
                event_types=[
                    EventType.EVENT_TYPE_USER_MESSAGE,
                    EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED,
                ],
                page_size=1000,
            ),
            metadata=metadata,
        )
    ]
    if not run_id:
        chats = [event for event in inputs if event.event_type == EventType.EVENT_TYPE_USER_MESSAGE]
        if not chats:
            return
        run_id = chats[-1].run_id
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
    async for event in memory.watch_events(session_id, after_seq, project_id=project_id, metadata=metadata):
        if event.event_type == EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED:
            paths[event.run_id] = _path(event)
        converted = run_event(event, paths.get(event.run_id, []))
        if converted is not None:
            yield converted
        if event.run_id == run_id and is_final(event):
            return


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
    elif kind == EventType.EVENT_TYPE_TOOL_CALL:
        body = _json(event.content)
        out.tool_call.call_id = str(meta.get("call_id", ""))
        out.tool_call.name = str(body.get("name", ""))
        out.tool_call.arguments.update(body.get("arguments") or {})
    elif kind == EventType.EVENT_TYPE_TOOL_RESULT:
        out.tool_result.call_id = str(meta.get("call_id", ""))
        out.tool_result.name = str(meta.get("tool", ""))
        out.tool_result.output = event.content
        out.tool_result.is_error = bool(meta.get("is_error", False))
    elif kind == EventType.EVENT_TYPE_DELEGATION_REQUEST:
        body = _json(event.content)
        out.delegation_request.delegation_id = event.delegation_id
        out.delegation_request.target_agent = str(body.get("agent", ""))
        out.delegation_request.task = str(body.get("task", ""))
    elif kind == EventType.EVENT_TYPE_DELEGATION_RESPONSE:
        body = _json(event.content)
        out.delegation_response.delegation_id = event.delegation_id
        out.delegation_response.target_agent = str(body.get("agent", ""))
        out.delegation_response.outcome = _outcome(str(body.get("outcome", "")))
        out.delegation_response.content = str(body.get("content", ""))
    elif kind == EventType.EVENT_TYPE_ESCALATION:
        out.escalation.reason = event.content
    elif kind == EventType.EVENT_TYPE_ERROR and "code" in meta:
        out.run_failed.code = str(meta["code"])
        out.run_failed.message = event.content
    elif kind == EventType.EVENT_TYPE_ERROR:
        out.error.reason = str(meta.get("reason", ""))
        out.error.message = event.content
    else:
        return None
    return out


def _path(event: resources_pb2.Event) -> list[str]:
    path = json_format.MessageToDict(event.metadata).get("delegation_path") or []
    return [str(step) for step in path]


def _json(content: str) -> dict[str, Any]:
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
