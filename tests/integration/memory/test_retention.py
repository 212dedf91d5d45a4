"""Retention over a real server, on SQLite and PostgreSQL: per-project policies, the background
sweeper, and readers told (not silently skipped) when the history they ask for is gone."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import InvalidArgument, OutOfRange
from tests.integration.memory.builders import new_event
from tests.polling import eventually


async def first_seq(memory: MemoryClient, session_id: str) -> int:
    return (await memory.get_session(session_id)).first_seq


async def test_a_policy_is_per_project_and_reads_back(memory: MemoryClient) -> None:
    assert (await memory.get_retention_policy("p-1")).max_events_per_session == 0
    stored = await memory.set_retention_policy("p-1", max_age_seconds=3600, max_events_per_session=50)
    assert (stored.project_id, stored.max_age_seconds, stored.max_events_per_session) == ("p-1", 3600, 50)
    assert await memory.get_retention_policy("p-1") == stored
    assert (await memory.get_retention_policy("p-2")).max_age_seconds == 0
    await memory.set_retention_policy("p-1", max_events_per_session=10)
    assert (await memory.get_retention_policy("p-1")).max_age_seconds == 0


@pytest.mark.parametrize(
    ("project_id", "max_age_seconds", "max_events", "field"),
    [
        ("", 0, 10, "policy.project_id"),
        ("p-1", -1, 0, "policy.max_age_seconds"),
        ("p-1", 0, -1, "policy.max_events_per_session"),
    ],
)
async def test_an_invalid_policy_is_rejected(
    memory: MemoryClient, project_id: str, max_age_seconds: int, max_events: int, field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await memory.set_retention_policy(
            project_id, max_age_seconds=max_age_seconds, max_events_per_session=max_events
        )
    assert [v.field for v in caught.value.violations] == [field]


async def test_max_events_keeps_the_newest_and_readers_of_trimmed_history_are_told(
    memory: MemoryClient,
) -> None:
    await memory.append_events("long", "p-1", [new_event(str(n)) for n in range(1, 51)])
    await memory.append_events("short", "p-1", [new_event("only")])
    await memory.append_events("foreign", "p-2", [new_event(str(n)) for n in range(1, 51)])
    page = await memory.list_events(pb.ListEventsRequest(session_id="long", page_size=10))

    await memory.set_retention_policy("p-1", max_events_per_session=20)

    async def trimmed() -> bool:
        return await first_seq(memory, "long") == 31

    await eventually(trimmed)
    session = await memory.get_session("long")
    assert (session.first_seq, session.last_seq) == (31, 50)
    kept = await memory.list_events(
        pb.ListEventsRequest(session_id="long", page_size=100, include_total_size=True)
    )
    assert [event.seq for event in kept.events] == list(range(31, 51))
    assert kept.total_size == 20
    assert await first_seq(memory, "short") == 1
    assert await first_seq(memory, "foreign") == 1

    # Asking for what is gone is OUT_OF_RANGE, with where the history now starts.
    with pytest.raises(OutOfRange) as caught:
        await memory.list_events(pb.ListEventsRequest(session_id="long", after_seq=10))
    assert caught.value.reason == "HISTORY_TRIMMED"
    assert caught.value.metadata["first_seq"] == "31"
    # So is the next page of a reader that was paging through it.
    with pytest.raises(OutOfRange) as caught:
        await memory.list_events(
            pb.ListEventsRequest(session_id="long", page_size=10, page_token=page.next_page_token)
        )
    assert [v.field for v in caught.value.violations] == ["page_token"]
    with pytest.raises(OutOfRange):
        async for _ in memory.watch_events("long", after_seq=5):
            pass
    # Resuming right at the edge is fine.
    response = await memory.list_events(pb.ListEventsRequest(session_id="long", after_seq=30, page_size=1))
    assert [event.seq for event in response.events] == [31]

    # Appends go on numbering after the trimmed history, and the bound keeps holding.
    appended = await memory.append_events("long", "p-1", [new_event(str(n)) for n in range(51, 61)])
    assert [event.seq for event in appended.events] == list(range(51, 61))

    async def trimmed_again() -> bool:
        return await first_seq(memory, "long") == 41

    await eventually(trimmed_again)


async def test_max_age_removes_old_events(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event(str(n)) for n in range(20)])
    await memory.set_retention_policy("p-1", max_age_seconds=3)

    async def trimmed() -> bool:
        return await first_seq(memory, "s-1") == 21

    # Polled, not slept for: whenever the sweep comes, the 20 old events go and nothing else. An
    # event appended after them is seconds younger than the bound, a margin a loaded machine keeps.
    await eventually(trimmed, timeout=30, what="events older than max_age removed")
    await memory.append_events("s-1", "p-1", [new_event("fresh")])
    kept = await memory.list_events(pb.ListEventsRequest(session_id="s-1"))
    assert [(event.seq, event.content) for event in kept.events] == [(21, "fresh")]


async def test_trimming_what_a_live_watcher_has_seen_does_not_disturb_it(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event(str(n)) for n in range(30)])
    seen: list[int] = []
    caught_up = asyncio.Event()

    async def watch() -> None:
        async for event in memory.watch_events("s-1", after_seq=0):
            seen.append(event.seq)
            if event.seq == 30:
                caught_up.set()
            if event.seq == 40:
                return

    watcher = asyncio.create_task(watch())
    async with asyncio.timeout(10):
        await caught_up.wait()
    await memory.set_retention_policy("p-1", max_events_per_session=5)

    async def trimmed() -> bool:
        return await first_seq(memory, "s-1") == 26

    await eventually(trimmed)
    await memory.append_events("s-1", "p-1", [new_event(str(n)) for n in range(10)])
    async with asyncio.timeout(10):
        await watcher
    assert seen == list(range(1, 41))
