"""What a project's events weigh (EventStore.stored_bytes), as every store implementation counts it
against the project's `stored_bytes` limit: each event's content and metadata JSON in UTF-8 bytes,
added by the append that stores it, whichever way the store writes it (alone, in a transaction, in
a PostgreSQL group commit), and subtracted by the trim that removes it."""

from __future__ import annotations

import asyncio

from agentmesh.memory.event_store import EventStore
from agentmesh.memory.validation import event_bytes
from tests.integration.memory.test_store_contract import T0, append, new, store

__all__ = ["store"]  # the fixture: every store implementation in turn


async def test_appends_add_what_their_events_weigh_per_project(store: EventStore) -> None:
    assert await store.stored_bytes("p-1") == 0
    plain, accented = new("hello"), new("héllo", metadata={"usage": {"tokens": 3}})
    # Bytes, not characters: "é" is two; the metadata as compact JSON.
    assert event_bytes(accented) == len("héllo".encode()) + len('{"usage":{"tokens":3}}')
    await append(store, "a", [plain, accented])
    await append(store, "a", [new("more")], expected_last_seq=2)
    await append(store, "b", [new("other")], project_id="p-2")
    assert await store.stored_bytes("p-1") == 5 + event_bytes(accented) + 4
    assert await store.stored_bytes("p-2") == 5


async def test_concurrent_appends_of_many_sessions_are_all_counted(store: EventStore) -> None:
    # On PostgreSQL these go in group commits, several sessions to a statement.
    await asyncio.gather(*(append(store, f"s{n}", [new("x" * n), new("y")]) for n in range(1, 41)))
    assert await store.stored_bytes("p-1") == sum(n + 1 for n in range(1, 41))


async def test_a_trim_subtracts_what_it_removed_and_a_deleted_project_weighs_nothing(
    store: EventStore,
) -> None:
    await append(store, "long", [new("x" * n) for n in range(1, 11)])
    await append(store, "other", [new("kept")])
    assert await store.stored_bytes("p-1") == sum(range(1, 11)) + 4
    assert await store.trim_session("long", "p-1", first_seq=8) == 7
    assert await store.trim_session("long", "p-1", first_seq=8) == 0  # once
    assert await store.stored_bytes("p-1") == 8 + 9 + 10 + 4
    await store.delete_project("p-1", now=T0)
    assert await store.stored_bytes("p-1") == 0
