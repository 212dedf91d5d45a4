"""A task read stops early (`told_enough`): the task it rebuilds from the newest events it read
is the task the run's every event makes, for every history length — state, status message,
artifacts and history alike."""

from __future__ import annotations

import json

import pytest

from agentmesh.gateway.a2a.convert import TASK_EVENT_TYPES, TaskId, task_from_events, told_enough
from agentmesh.memory.v1 import resources_pb2

EventType = resources_pb2.EventType
TASK = TaskId("run-1", "session-1")


def event(seq: int, event_type: int, content: str, **metadata: str) -> resources_pb2.Event:
    recorded = resources_pb2.Event(
        id=f"e-{seq}",
        session_id=TASK.session_id,
        run_id=TASK.run_id,
        seq=seq,
        event_type=event_type,
        content=content,
    )
    recorded.metadata.update(metadata)
    recorded.created_at.FromSeconds(1_700_000_000 + seq)
    return recorded


def asked(seq: int, request_id: str) -> resources_pb2.Event:
    body = {"request_id": request_id, "kind": "question", "question": "Which city?"}
    return event(seq, EventType.EVENT_TYPE_INPUT_REQUESTED, json.dumps(body))


def answered(seq: int, request_id: str, body: dict[str, object]) -> resources_pb2.Event:
    return event(seq, EventType.EVENT_TYPE_INPUT_RECEIVED, json.dumps(body), request_id=request_id)


RUNS = {
    "answered": [
        event(1, EventType.EVENT_TYPE_USER_MESSAGE, "Book a trip"),
        event(2, EventType.EVENT_TYPE_TOOL_CALL, "{}"),
        asked(3, "q-1"),
        answered(4, "q-1", {"expired": True}),  # nobody said anything: no message in the history
        asked(5, "q-2"),
        answered(6, "q-2", {"answer": "Lisbon"}),
        event(7, EventType.EVENT_TYPE_ERROR, "a tool failed", reason="TOOL_FAILED"),  # recovered from
        event(8, EventType.EVENT_TYPE_AGENT_RESPONSE, "Booked: Lisbon"),
    ],
    "failed": [
        event(1, EventType.EVENT_TYPE_USER_MESSAGE, "Do it"),
        event(2, EventType.EVENT_TYPE_ERROR, "cancelled", reason="CANCELLED", code="CANCELLED"),
    ],
    "waiting": [
        event(1, EventType.EVENT_TYPE_USER_MESSAGE, "Book a trip"),
        asked(2, "q-1"),
        asked(3, "q-2"),
        answered(4, "q-1", {"answer": "Lisbon"}),
    ],
}


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("history_length", [None, 0, 1, 2, 3, 4, 10])
def test_the_newest_events_a_read_stops_at_make_the_whole_runs_task(
    run: str, history_length: int | None
) -> None:
    events = RUNS[run]
    whole = task_from_events(TASK, events, history_length=history_length).task
    told: list[resources_pb2.Event] = []
    for recorded in reversed([e for e in events if e.event_type in TASK_EVENT_TYPES]):
        told.append(recorded)
        if told_enough(told, history_length):
            break
    read = task_from_events(TASK, told[::-1], history_length=history_length).task
    assert (read.status.state, read.status.message, list(read.artifacts), list(read.history)) == (
        whole.status.state,
        whole.status.message,
        list(whole.artifacts),
        list(whole.history),
    )
    if run == "answered" and history_length in (0, 1):
        assert [e.seq for e in told] == [8]  # the end is the one message asked for: nothing older
