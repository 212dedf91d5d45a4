"""Session turns (double texting) over every RegistryStore implementation (in memory, SQLite,
PostgreSQL): a user's message's run queues behind its session's turns in flight, in order; reject
queues nothing; interrupt marks the turns ahead for their executors; a turn counts only while its
run is in flight (finished or orphaned-then-closed, it blocks nobody)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from tests.integration.registry.test_store_contract import T0, _world

LEASE = timedelta(seconds=5)


async def _start(
    store: RegistryStore, visible: Visibility, agent_id: str, run_id: str, executor: str
) -> None:
    change = await store.start_run(
        visible, agent_id, run_id, T0, lease=RunLease("session-1", executor, T0 + LEASE)
    )
    assert change is not None and change.changed


async def _finish(store: RegistryStore, visible: Visibility, agent_id: str, run_id: str) -> None:
    await store.finish_run(visible, agent_id, run_id, T0, completed=True, tokens_used=0, cost=0.0)


async def test_turns_queue_in_order_and_count_only_while_their_run_is_in_flight(
    registry_store: RegistryStore,
) -> None:
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    turns = registry_store.leases
    for run_id in ("a", "b", "c"):
        await _start(registry_store, visible, agent.id, run_id, "executor-1")
    assert await turns.take_turn("session-1", (agent.id, "a")) == []
    assert await turns.take_turn("session-1", (agent.id, "b")) == [(agent.id, "a")]
    assert await turns.take_turn("session-1", (agent.id, "c")) == [(agent.id, "a"), (agent.id, "b")]
    # A retried take keeps its place; another session is not in the way.
    assert await turns.take_turn("session-1", (agent.id, "b")) == [(agent.id, "a")]
    await _start(registry_store, visible, agent.id, "elsewhere", "executor-1")
    assert await turns.take_turn("session-2", (agent.id, "elsewhere")) == []

    assert await turns.turns_ahead((agent.id, "c")) == [(agent.id, "a"), (agent.id, "b")]
    await _finish(registry_store, visible, agent.id, "a")
    assert await turns.turns_ahead((agent.id, "b")) == []
    assert await turns.turns_ahead((agent.id, "c")) == [(agent.id, "b")]
    # An orphaned run is still in flight (its taker closes it); once closed, it is not.
    assert await turns.expire(T0 + LEASE * 2) == 3
    assert await turns.turns_ahead((agent.id, "c")) == [(agent.id, "b")]
    claimed = await turns.claim("executor-2", T0 + LEASE * 2, T0 + LEASE * 3, 10)
    await turns.close("executor-2", [(o.agent_id, o.run_id) for o in claimed], T0 + LEASE * 2)
    assert await turns.turns_ahead((agent.id, "c")) == []
    assert await turns.turns_ahead((agent.id, "unknown")) == []


async def test_reject_queues_nothing_and_interrupt_marks_the_turns_ahead(
    registry_store: RegistryStore,
) -> None:
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    turns = registry_store.leases
    await _start(registry_store, visible, agent.id, "first", "executor-1")
    await _start(registry_store, visible, agent.id, "second", "executor-2")
    assert await turns.take_turn("session-1", (agent.id, "first"), reject=True) == []
    assert await turns.take_turn("session-1", (agent.id, "second"), reject=True) == [(agent.id, "first")]
    await _start(registry_store, visible, agent.id, "third", "executor-2")
    # The rejected one took no turn: the next one waits only for the first.
    assert await turns.take_turn("session-1", (agent.id, "third"), interrupt=True) == [(agent.id, "first")]
    assert await turns.interrupted("executor-1") == [(agent.id, "first")]
    assert await turns.interrupted("executor-2") == []
    await _finish(registry_store, visible, agent.id, "first")
    assert await turns.interrupted("executor-1") == []
    assert await turns.turns_ahead((agent.id, "third")) == []


async def test_concurrent_takes_of_one_session_queue_every_run_once(registry_store: RegistryStore) -> None:
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    runs = [f"run-{index}" for index in range(8)]
    for run_id in runs:
        await _start(registry_store, visible, agent.id, run_id, "executor-1")
    ahead = await asyncio.gather(
        *(registry_store.leases.take_turn("session-1", (agent.id, run_id), reject=True) for run_id in runs)
    )
    # Exactly one of them got the turn; every other one saw a turn in flight.
    assert sum(1 for found in ahead if not found) == 1
