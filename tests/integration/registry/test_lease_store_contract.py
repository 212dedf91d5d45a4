"""The RunLeaseStore contract, over every RegistryStore implementation (in memory, SQLite,
PostgreSQL): a lease not renewed expires, the run stops counting (the agent goes idle), and the
orphan goes to exactly one live executor, which closes it."""

from __future__ import annotations

from datetime import timedelta

from agentmesh.registry.models import AgentStatus
from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from tests.integration.registry.test_store_contract import T0, _world

LEASE = timedelta(seconds=5)


async def _agent_status(store: RegistryStore, agent_id: str) -> tuple[AgentStatus, int]:
    async with store.read() as tx:
        agent = await tx.get_agent(agent_id=agent_id)
    assert agent is not None
    return agent.status, agent.runs_in_flight


async def test_an_unrenewed_lease_expires_and_its_run_goes_to_one_live_executor(
    registry_store: RegistryStore,
) -> None:
    owner, _, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    leases = registry_store.leases
    for run_id in ("kept", "dropped"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("session-1", "executor-a", T0 + LEASE)
        )
    assert await _agent_status(registry_store, agent.id) == (AgentStatus.WORKING, 2)

    # Executor a renews one of its runs; another executor's renewal of it is refused (lost).
    later = T0 + timedelta(seconds=4)
    assert await leases.renew("executor-a", [(agent.id, "kept")], later + LEASE) == []
    assert await leases.renew("executor-b", [(agent.id, "kept")], later + LEASE) == [(agent.id, "kept")]

    expired_at = T0 + timedelta(seconds=6)
    # Only the runs of the executors named (a registry that just started spares the others).
    assert await leases.expire(expired_at, executor_ids={"executor-b"}) == 0
    assert await leases.expire(expired_at, executor_ids=set()) == 0
    assert await leases.expire(expired_at, executor_ids={"executor-a"}) == 1
    assert await leases.expire(expired_at) == 0
    assert await _agent_status(registry_store, agent.id) == (AgentStatus.WORKING, 1)
    # The run it lost is not executor a's any more: its renewal says so.
    assert await leases.renew("executor-a", [(agent.id, "dropped")], later + LEASE) == [(agent.id, "dropped")]
    # Finishing the orphan (a late end from its old executor) does not count it twice.
    finished = await registry_store.finish_run(
        visible, agent.id, "dropped", expired_at, completed=True, tokens_used=0, cost=0.0
    )
    assert finished is not None and not finished.changed

    (orphan,) = await leases.claim("executor-b", expired_at, expired_at + LEASE, 10)
    assert (orphan.agent_id, orphan.run_id, orphan.session_id) == (agent.id, "dropped", "session-1")
    assert (orphan.project_id, orphan.agent_name) == (project.id, agent.name)
    assert await leases.claim("executor-c", expired_at, expired_at + LEASE, 10) == []
    # Its taker dies too: once the taker's lease expires, another executor gets it.
    again = expired_at + LEASE + timedelta(seconds=1)
    assert [o.run_id for o in await leases.claim("executor-c", again, again + LEASE, 10)] == ["dropped"]
    await leases.close("executor-b", [(agent.id, "dropped")], T0)  # not b's any more: kept
    await leases.close("executor-c", [(agent.id, "dropped")], T0)
    assert await leases.claim("executor-d", again + LEASE * 2, again + LEASE * 3, 10) == []

    finished = await registry_store.finish_run(
        visible, agent.id, "kept", again, completed=True, tokens_used=3, cost=0.0
    )
    assert finished is not None and finished.changed
    assert await _agent_status(registry_store, agent.id) == (AgentStatus.IDLE, 0)


async def test_a_run_started_without_a_lease_never_expires(registry_store: RegistryStore) -> None:
    owner, _, _, agent = await _world(registry_store)
    await registry_store.start_run(Visibility(owner, everything=False), agent.id, "old-client", T0)
    assert await registry_store.leases.expire(T0 + timedelta(days=1)) == 0
    assert await _agent_status(registry_store, agent.id) == (AgentStatus.WORKING, 1)


async def _counters(store: RegistryStore, agent_id: str) -> tuple[AgentStatus, int, int, int]:
    async with store.read() as tx:
        agent = await tx.get_agent(agent_id=agent_id)
    assert agent is not None
    return agent.status, agent.runs_in_flight, agent.tasks_completed, agent.tokens_used


async def test_a_resumed_orphan_counts_in_flight_again_and_its_end_counts_once(
    registry_store: RegistryStore,
) -> None:
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    leases = registry_store.leases
    for run_id in ("resumed", "closed"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("session-1", "executor-a", T0 + LEASE)
        )
    expired_at = T0 + timedelta(seconds=6)
    assert await leases.expire(expired_at) == 2
    assert await _counters(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0, 0)
    taken = await leases.claim("executor-b", expired_at, expired_at + LEASE, 10)
    assert sorted(orphan.run_id for orphan in taken) == ["closed", "resumed"]

    # Only the orphan's holder may resume it; the others are told they do not hold it.
    resumed, closed = (agent.id, "resumed"), (agent.id, "closed")
    assert await leases.resume("executor-c", [resumed], expired_at, expired_at + LEASE) == [resumed]
    assert await leases.resume("executor-b", [(agent.id, "unknown")], expired_at, expired_at + LEASE) == [
        (agent.id, "unknown")
    ]
    assert await _counters(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0, 0)
    assert await leases.resume("executor-b", [resumed], expired_at, expired_at + LEASE) == []
    assert await _counters(registry_store, agent.id) == (AgentStatus.WORKING, 1, 0, 0)
    # A retry (the first answer was lost) counts nothing twice.
    assert await leases.resume("executor-b", [resumed], expired_at, expired_at + LEASE) == []
    assert await _counters(registry_store, agent.id) == (AgentStatus.WORKING, 1, 0, 0)
    # Closing it is not how it ends (it is no orphan any more); the closed one stays counted out,
    # exactly once.
    await leases.close("executor-b", [resumed, closed], T0)
    assert await _counters(registry_store, agent.id) == (AgentStatus.WORKING, 1, 0, 0)
    # Nobody else is handed either, even once their leases from the claim ran out.
    assert await leases.claim("executor-c", expired_at + LEASE * 3, expired_at + LEASE * 4, 10) == []
    assert await leases.renew("executor-c", [resumed], expired_at + LEASE * 4) == [resumed]

    # The resumed run's end is a normal finish: counted out once, with its usage.
    renewed = expired_at + timedelta(seconds=2)
    assert await leases.renew("executor-b", [resumed], renewed + LEASE) == []
    finished = await registry_store.finish_run(
        visible, agent.id, "resumed", renewed, completed=True, tokens_used=7, cost=0.5
    )
    assert finished is not None and finished.changed
    assert await _counters(registry_store, agent.id) == (AgentStatus.IDLE, 0, 1, 7)
    again = await registry_store.finish_run(
        visible, agent.id, "resumed", renewed, completed=True, tokens_used=7, cost=0.5
    )
    assert again is not None and not again.changed
    assert await leases.claim("executor-c", renewed + LEASE * 5, renewed + LEASE * 6, 10) == []


async def test_a_resumed_run_whose_taker_dies_is_counted_out_and_handed_out_again(
    registry_store: RegistryStore,
) -> None:
    owner, _, _, agent = await _world(registry_store)
    leases = registry_store.leases
    await registry_store.start_run(
        Visibility(owner, everything=False), agent.id, "r", T0, lease=RunLease("s", "executor-a", T0 + LEASE)
    )
    first = T0 + timedelta(seconds=6)
    assert await leases.expire(first) == 1
    assert [o.run_id for o in await leases.claim("executor-b", first, first + LEASE, 10)] == ["r"]
    assert await leases.resume("executor-b", [(agent.id, "r")], first, first + LEASE) == []
    assert await _counters(registry_store, agent.id) == (AgentStatus.WORKING, 1, 0, 0)
    # Executor b dies while the run goes on: its lease expires like any run's.
    second = first + LEASE + timedelta(seconds=1)
    assert await leases.expire(second) == 1
    assert await _counters(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0, 0)
    assert await leases.renew("executor-b", [(agent.id, "r")], second + LEASE) == [(agent.id, "r")]
    assert [o.run_id for o in await leases.claim("executor-c", second, second + LEASE, 10)] == ["r"]
