"""WatchEvents over a real server, on SQLite and PostgreSQL: replay, then live, with no gap and
no duplicate while writers append concurrently."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import InvalidArgument, Unavailable
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel
from tests.integration.memory.builders import new_event


async def collect(memory: MemoryClient, session_id: str, after_seq: int, until_seq: int) -> list:
    seen = []
    async with asyncio.timeout(60):
        async for event in memory.watch_events(session_id, after_seq):
            seen.append(event)
            if event.seq >= until_seq:
                return seen
    return seen


async def test_a_watcher_sees_every_later_event_once_in_order_during_concurrent_appends(
    memory: MemoryClient,
) -> None:
    await memory.append_events("live", "p-1", [new_event(f"before {n}") for n in range(50)])
    after_seq = 20
    watcher = asyncio.create_task(collect(memory, "live", after_seq, until_seq=1050))

    async def writer(name: str) -> None:
        for index in range(100):
            await memory.append_events("live", "p-1", [new_event(f"{name} {index}", agent=name)])

    await asyncio.gather(*(writer(f"writer-{n}") for n in range(10)))
    seen = await watcher

    assert [event.seq for event in seen] == list(range(after_seq + 1, 1051))
    stored = await memory.list_events(
        pb.ListEventsRequest(session_id="live", after_seq=after_seq, page_size=1000)
    )
    rest = await memory.list_events(
        pb.ListEventsRequest(
            session_id="live", after_seq=after_seq, page_size=1000, page_token=stored.next_page_token
        )
    )
    assert seen == [*stored.events, *rest.events]


async def test_several_watchers_each_see_every_batch_whole(memory: MemoryClient) -> None:
    await memory.append_events("batches", "p-1", [new_event("first")])
    watchers = [asyncio.create_task(collect(memory, "batches", 0, 301)) for _ in range(3)]
    for start in range(0, 300, 30):
        await memory.append_events("batches", "p-1", [new_event(str(n)) for n in range(start, start + 30)])
    for watcher in watchers:
        assert [event.seq for event in await watcher] == list(range(1, 302))


async def test_a_watcher_that_lost_its_stream_resumes_where_it_left_off(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("one")])
    first = await collect(memory, "s-1", 0, until_seq=1)
    assert [event.content for event in first] == ["one"]

    resumed = asyncio.create_task(collect(memory, "s-1", first[-1].seq, until_seq=3))
    await asyncio.sleep(0.05)
    await memory.append_events("s-1", "p-1", [new_event("two"), new_event("three")])
    assert [event.content for event in await resumed] == ["two", "three"]


async def test_a_watcher_sees_appends_made_by_another_replica(memory_settings, memory: MemoryClient) -> None:
    """Two memory services on one database: the watcher's replica learns of the other's appends
    by polling."""
    from agentmesh.memory.app import start

    await memory.append_events("shared", "p-1", [new_event("zero")])
    other = await start(memory_settings)
    try:
        async with authorized_channel(other.address) as channel:
            writer = MemoryClient(channel)
            watcher = asyncio.create_task(collect(memory, "shared", 1, until_seq=21))
            for n in range(20):
                await writer.append_events("shared", "p-1", [new_event(str(n))])
            assert [event.seq for event in await watcher] == list(range(2, 22))
    finally:
        await other.stop(0)


async def test_stopping_the_service_ends_watches_with_unavailable_and_the_resume_point(
    memory_service: RunningService, memory: MemoryClient
) -> None:
    await memory.append_events("s-1", "p-1", [new_event("one"), new_event("two")])
    seen = []
    caught_up = asyncio.Event()

    async def watch() -> None:
        async for event in memory.watch_events("s-1", 0):
            seen.append(event.seq)
            if event.seq == 2:
                caught_up.set()

    watcher = asyncio.create_task(watch())
    await caught_up.wait()
    async with asyncio.timeout(5):  # far below the grace period: the stream does not hold the stop
        await memory_service.stop(30)
    with pytest.raises(Unavailable) as caught:
        await watcher
    assert seen == [1, 2]
    assert caught.value.metadata.get("after_seq") == "2"


async def test_a_negative_after_seq_is_invalid(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event()])
    with pytest.raises(InvalidArgument) as caught:
        async for _ in memory.watch_events("s-1", -1):
            pass
    assert [v.field for v in caught.value.violations] == ["after_seq"]
