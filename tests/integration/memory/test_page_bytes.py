"""Pages of events bounded by bytes as well as by count, over a real server, on SQLite and
PostgreSQL: a page of large events stops early, says so, and its token goes on where it stopped,
so no page passes gRPC's message size whatever page_size asks."""

from __future__ import annotations

import pytest

from agentmesh.memory.app import start
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.settings import MemorySettings
from agentmesh.memory.v1 import memory_service_pb2 as pb
from tests.bearer import authorized_channel
from tests.integration.memory.builders import EventType, new_event

LARGE = 200 * 1024
PAGE_BYTES = 1024 * 1024


@pytest.fixture
def memory_settings(memory_settings: MemorySettings) -> MemorySettings:
    return memory_settings.model_copy(update={"max_event_bytes": 256 * 1024, "max_page_bytes": PAGE_BYTES})


@pytest.fixture
async def large_session(memory: MemoryClient) -> None:
    """Session "big" of project "p-1": 24 events of 200 KB (4.8 MB, more than one gRPC message
    may carry), appended a few at a time (an append is one message too), then 10 small ones."""
    for first in range(0, 24, 4):
        batch = [new_event(f"{seq:04d}" + "x" * (LARGE - 4), run_id="r-1") for seq in range(first, first + 4)]
        await memory.append_events("big", "p-1", batch)
    await memory.append_events("big", "p-1", [new_event(f"small {n}", run_id="r-2") for n in range(10)])


async def every_page(memory: MemoryClient, request: pb.ListEventsRequest) -> list[pb.ListEventsResponse]:
    found = []
    while True:
        response = await memory.list_events(request)
        found.append(response)
        if not response.next_page_token:
            return found
        request.page_token = response.next_page_token


async def test_a_page_of_large_events_stops_at_the_byte_bound_and_goes_on(
    memory: MemoryClient, large_session: None
) -> None:
    pages = await every_page(memory, pb.ListEventsRequest(session_id="big", page_size=1000))
    seqs = [event.seq for page in pages for event in page.events]
    assert seqs == list(range(1, 35))  # every event once, in order
    assert all(sum(len(e.content) for e in page.events) <= PAGE_BYTES for page in pages)
    assert [len(page.events) for page in pages[:-1]] == [PAGE_BYTES // LARGE] * (len(pages) - 1)
    assert all(page.byte_limit_reached for page in pages[:-1])
    assert not pages[-1].byte_limit_reached  # the last page ends with the session


async def test_newest_first_and_by_agent_are_bounded_alike(memory: MemoryClient, large_session: None) -> None:
    newest = await every_page(memory, pb.ListEventsRequest(session_id="big", page_size=1000, descending=True))
    assert [event.seq for page in newest for event in page.events] == list(range(34, 0, -1))
    assert newest[0].byte_limit_reached
    by_agent = await every_page(
        memory,
        pb.ListEventsRequest(project_id="p-1", agent="assistant", page_size=1000, include_total_size=True),
    )
    assert [event.seq for page in by_agent for event in page.events] == list(range(1, 35))
    assert by_agent[0].total_size == 34  # the total counts every match, not the page


async def test_a_page_within_the_bound_is_full_and_does_not_say_so(
    memory: MemoryClient, large_session: None
) -> None:
    small = await memory.list_events(
        pb.ListEventsRequest(
            session_id="big", page_size=5, after_seq=24, event_types=[EventType.EVENT_TYPE_USER_MESSAGE]
        )
    )
    assert [event.seq for event in small.events] == [25, 26, 27, 28, 29]
    assert small.next_page_token
    assert not small.byte_limit_reached


async def test_an_event_larger_than_the_bound_still_comes_one_a_page(
    memory_settings: MemorySettings, large_session: None
) -> None:
    service = await start(memory_settings.model_copy(update={"max_page_bytes": 1000}))
    channel = authorized_channel(service.address)
    try:
        pages = await every_page(MemoryClient(channel), pb.ListEventsRequest(session_id="big", page_size=30))
    finally:
        await channel.close()
        await service.stop(0)
    assert [len(page.events) for page in pages[:24]] == [1] * 24
    assert [event.seq for page in pages for event in page.events] == list(range(1, 35))
