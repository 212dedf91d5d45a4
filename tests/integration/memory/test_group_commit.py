"""Concurrent appends across sessions over a real server, on SQLite and PostgreSQL
(PostgreSQL writes the appends of different sessions that queue while a statement is in flight as
one group): seq stays gap-free per session, idempotency stays exact, and an append refused inside
a burst — a reused key, a stale expected last seq, a deleted project, a retry racing its first
attempt — gets its own error while every other append of the burst is stored."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import Aborted, AlreadyExists, NotFound
from tests.integration.memory.builders import new_event

SESSIONS = 24


async def contents(memory: MemoryClient, session_id: str, project_id: str = "p-1") -> list[str]:
    request = pb.ListEventsRequest(session_id=session_id, project_id=project_id, page_size=1000)
    events = [event async for event in memory.iter_events(request)]
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    return [event.content for event in events]


async def test_bursts_across_sessions_number_each_session_without_gaps(memory: MemoryClient) -> None:
    async def writer(session: int) -> list[int]:
        seqs = []
        for index in range(15):
            events = [new_event(f"{session}-{index}-{part}") for part in range(1 + index % 3)]
            response = await memory.append_events(f"s-{session}", "p-1", events, receipts_only=True)
            seqs += [event.seq for event in response.events]
            assert response.last_seq == seqs[-1]
        return seqs

    results = await asyncio.gather(*(writer(session) for session in range(SESSIONS)))

    expected_count = sum(1 + index % 3 for index in range(15))
    for session, seqs in enumerate(results):
        assert seqs == list(range(1, expected_count + 1))
        assert await contents(memory, f"s-{session}") == [
            f"{session}-{index}-{part}" for index in range(15) for part in range(1 + index % 3)
        ]


async def test_a_reused_key_in_a_burst_is_refused_alone(memory: MemoryClient) -> None:
    await memory.append_events("s-keyed", "p-1", [new_event("original", idempotency_key="k")])

    for round_ in range(5):
        # The first append of a burst goes alone; the reused key comes after it, in a group.
        *outcomes, reused = await asyncio.gather(
            *(memory.append_events(f"s-{n}", "p-1", [new_event(f"{round_}")]) for n in range(SESSIONS)),
            memory.append_events("s-keyed", "p-1", [new_event(f"changed {round_}", idempotency_key="k")]),
            return_exceptions=True,
        )

        assert isinstance(reused, AlreadyExists)
        assert reused.reason == "IDEMPOTENCY_KEY_REUSED"
        assert [response.events[0].seq for response in outcomes] == [round_ + 1] * SESSIONS
    assert await contents(memory, "s-keyed") == ["original"]
    for n in range(SESSIONS):
        assert await contents(memory, f"s-{n}") == [str(round_) for round_ in range(5)]


async def test_a_retry_in_a_burst_is_answered_as_the_first_and_the_rest_is_stored(
    memory: MemoryClient,
) -> None:
    # The retry's first attempt writes without looking its key up: its statement fails on the
    # unique key, and must not take the other appends of its group down with it.
    event = new_event("charge the card", idempotency_key="op-1")
    first = await memory.append_events("s-retried", "p-1", [event])

    for round_ in range(5):
        *others, retry = await asyncio.gather(
            *(memory.append_events(f"s-{n}", "p-1", [new_event(f"{round_}")]) for n in range(SESSIONS)),
            memory.append_events("s-retried", "p-1", [event]),
        )

        assert list(retry.events) == list(first.events)
        assert [response.events[0].seq for response in others] == [round_ + 1] * SESSIONS
    assert await contents(memory, "s-retried") == ["charge the card"]


async def test_a_stale_expected_last_seq_in_a_burst_is_aborted_alone(memory: MemoryClient) -> None:
    await memory.append_events("s-raced", "p-1", [new_event("one"), new_event("two")])

    outcomes = await asyncio.gather(
        *(
            memory.append_events(f"s-{n}", "p-1", [new_event("x")], expected_last_seq=0)
            for n in range(SESSIONS)
        ),
        memory.append_events("s-raced", "p-1", [new_event("stale")], expected_last_seq=1),
        memory.append_events("s-new", "p-1", [new_event("ahead")], expected_last_seq=4),
        memory.append_events("s-fresh", "p-1", [new_event("first")], expected_last_seq=0),
        return_exceptions=True,
    )

    *others, stale, ahead, fresh = outcomes
    assert isinstance(stale, Aborted) and stale.metadata["last_seq"] == "2"
    assert isinstance(ahead, Aborted) and ahead.metadata["last_seq"] == "0"
    assert fresh.events[0].seq == 1
    assert [response.events[0].seq for response in others] == [1] * SESSIONS
    assert await contents(memory, "s-raced") == ["one", "two"]
    with pytest.raises(NotFound):
        await memory.get_session("s-new", project_id="p-1")


async def test_an_append_to_a_deleted_project_in_a_burst_is_refused_alone(memory: MemoryClient) -> None:
    await memory.append_events("s-gone", "p-gone", [new_event("one")])
    assert await memory.delete_project_sessions("p-gone") == 1

    *outcomes, gone, other = await asyncio.gather(
        *(memory.append_events(f"s-{n}", "p-1", [new_event("x")]) for n in range(SESSIONS)),
        memory.append_events("s-gone", "p-gone", [new_event("late")]),
        memory.append_events("s-other", "p-gone", [new_event("late, new session")]),
        return_exceptions=True,
    )

    for refused in (gone, other):
        assert isinstance(refused, NotFound) and refused.reason == "PROJECT_DELETED"
    assert [response.events[0].seq for response in outcomes] == [1] * SESSIONS
