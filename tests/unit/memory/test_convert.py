"""Protobuf ↔ JSON conversions the gateway's REST routes rely on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.protobuf import timestamp_pb2

from agentmesh.memory.client import (
    event_to_dict,
    event_type_from_name,
    event_type_name,
    event_type_names,
    session_to_dict,
)
from agentmesh.memory.convert import new_events_from_proto
from agentmesh.memory.errors import ValidationFailed
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import resources_pb2

DESIGN_EVENT_TYPES = [
    "user_message",
    "agent_response",
    "tool_call",
    "tool_result",
    "delegation_request",
    "delegation_response",
    "task_delegation_received",
    "escalation",
    "error",
    # A person in the loop (DESIGN §12).
    "input_requested",
    "input_received",
    # Sessions that last (DESIGN §12).
    "context_compacted",
]


def test_every_event_type_has_its_lower_case_name_both_ways() -> None:
    assert event_type_names() == DESIGN_EVENT_TYPES
    for name in DESIGN_EVENT_TYPES:
        number = event_type_from_name(name)
        assert resources_pb2.EventType.Name(number) == "EVENT_TYPE_" + name.upper()
        assert event_type_name(number) == name
    # Every storable enum value has a name: adding one to the proto without here fails this.
    storable = [v.number for v in resources_pb2.EventType.DESCRIPTOR.values if v.number]
    assert sorted(event_type_from_name(name) for name in DESIGN_EVENT_TYPES) == storable


@pytest.mark.parametrize("name", ["", "USER_MESSAGE", "event_type_user_message", "unspecified", "chat"])
def test_unknown_event_type_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="event type"):
        event_type_from_name(name)


def test_unspecified_is_not_a_name() -> None:
    with pytest.raises(ValueError):
        event_type_name(resources_pb2.EVENT_TYPE_UNSPECIFIED)


def test_event_to_dict_has_exactly_the_design_fields() -> None:
    created = timestamp_pb2.Timestamp()
    created.FromDatetime(datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    event = resources_pb2.Event(
        id="e-1",
        session_id="s-1",
        seq=7,
        agent="worker",
        event_type=resources_pb2.EVENT_TYPE_TASK_DELEGATION_RECEIVED,
        content='{"task": "add"}',
        delegation_id="d-1",
        created_at=created,
    )
    event.metadata.update({"depth": 2, "nested": {"ok": True, "ratio": 0.25}})

    assert event_to_dict(event) == {
        "id": "e-1",
        "session_id": "s-1",
        "seq": 7,
        "agent": "worker",
        "event_type": "task_delegation_received",
        "content": '{"task": "add"}',
        "metadata": {"depth": 2, "nested": {"ok": True, "ratio": 0.25}},
        "run_id": None,
        "parent_event_id": None,
        "delegation_id": "d-1",
        "trace_id": None,
        "span_id": None,
        "created_at": "2030-05-06T07:08:09.123456Z",
        "idempotency_key": None,
    }


def test_session_to_dict() -> None:
    session = resources_pb2.Session(
        id="s-1",
        project_id="p-1",
        agent="a",
        last_seq=9,
        first_seq=3,
        context_start_seq=7,
        forked_from_session_id="s-0",
        forked_at_seq=4,
    )
    assert session_to_dict(session) == {
        "id": "s-1",
        "project_id": "p-1",
        "agent": "a",
        "created_at": None,
        "updated_at": None,
        "last_seq": 9,
        "first_seq": 3,
        "context_start_seq": 7,
        "forked_from_session_id": "s-0",
        "forked_at_seq": 4,
    }


def test_new_events_name_every_bad_event_type() -> None:
    events = [
        pb.NewEvent(agent="a", event_type=resources_pb2.EVENT_TYPE_USER_MESSAGE),
        pb.NewEvent(agent="a"),
        pb.NewEvent(agent="a", event_type=99),
    ]
    with pytest.raises(ValidationFailed) as caught:
        new_events_from_proto(events)
    assert [v.field for v in caught.value.violations] == ["events[1].event_type", "events[2].event_type"]
