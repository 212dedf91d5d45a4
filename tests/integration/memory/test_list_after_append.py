"""AppendEventsRequest.list_after_append, on SQLite and PostgreSQL: a ListEvents of the session
answered after the append in the same call (what a delegated run's input and history read
become), holding the events just stored; refused before anything is written when the
listing is bad."""

from __future__ import annotations

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import InvalidArgument
from tests.integration.memory.builders import EventType, new_event

HISTORY = [EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED, EventType.EVENT_TYPE_AGENT_RESPONSE]


async def test_the_listing_is_read_after_the_append_in_the_same_call(memory: MemoryClient) -> None:
    await memory.append_events(
        "s-1",
        "p-1",
        [
            new_event(
                "earlier task", agent="worker", event_type=EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED
            ),
            new_event("earlier answer", agent="worker", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE),
            new_event("someone else's", agent="boss", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE),
        ],
    )
    listing = pb.ListEventsRequest(agent="worker", event_types=HISTORY, page_size=10, descending=True)

    response = await memory.append_events(
        "s-1",
        "p-1",
        [new_event("new task", agent="worker", event_type=EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED)],
        receipts_only=True,
        list_after_append=listing,
    )

    assert [e.seq for e in response.events] == [4]
    assert [(e.seq, e.content) for e in response.listed.events] == [
        (4, "new task"),
        (2, "earlier answer"),
        (1, "earlier task"),
    ]
    # Without it, nothing is listed.
    plain = await memory.append_events("s-1", "p-1", [new_event("more", agent="worker")])
    assert not plain.HasField("listed")


async def test_a_first_append_lists_only_itself(memory: MemoryClient) -> None:
    listing = pb.ListEventsRequest(session_id="fresh", project_id="p-1", agent="worker", page_size=5)
    response = await memory.append_events(
        "fresh", "p-1", [new_event("hi", agent="worker")], list_after_append=listing
    )
    assert [e.content for e in response.listed.events] == ["hi"]


@pytest.mark.parametrize(
    ("listing", "field"),
    [
        (pb.ListEventsRequest(session_id="other"), "list_after_append.session_id"),
        (pb.ListEventsRequest(project_id="p-2"), "list_after_append.project_id"),
        (pb.ListEventsRequest(page_size=-1), "page_size"),
        (pb.ListEventsRequest(event_types=[999]), "event_types[0]"),
    ],
)
async def test_a_bad_listing_is_refused_before_anything_is_written(
    memory: MemoryClient, listing: pb.ListEventsRequest, field: str
) -> None:
    await memory.append_events("s-2", "p-1", [new_event("first")])
    with pytest.raises(InvalidArgument) as refused:
        await memory.append_events("s-2", "p-1", [new_event("second")], list_after_append=listing)
    assert field in [v.field for v in refused.value.violations]
    assert field in refused.value.message
    assert (await memory.get_session("s-2")).last_seq == 1
