"""An executor holding more runs than one RenewRunLeases call may name (the registry takes 1,000)
renews them all, in several calls, against a real registry on SQLite and PostgreSQL (found by
the bench's 5,000 streams: one refused call renewed none, and every run was orphaned)."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

from agentmesh.executor.durability.leases import MAX_RUNS_PER_RENEWAL, LeaseKeeper, OrphanCloser
from agentmesh.memory.client import MemoryClient
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.settings import RegistrySettings
from tests.integration.registry.support import Worker, make_settings

HELD = MAX_RUNS_PER_RENEWAL + 150


@pytest.fixture
def registry_settings(database_url: str) -> RegistrySettings:
    """Leases long enough that none expires while the runs are being started, however busy the
    machine (starting 1,150 runs took more than the default 10 s under load): an upper bound, so
    the test shows renewal in chunks and nothing about timing."""
    return make_settings(database_url, run_lease_seconds=600)


async def test_more_runs_than_one_call_takes_are_all_renewed(client: RegistryClient, worker: Worker) -> None:
    agent, system = worker.agent, worker.system
    run_ids = [f"run-{n}" for n in range(HELD)]
    for start in range(0, HELD, 50):
        await asyncio.gather(
            *(
                client.start_agent_run(
                    agent.id, run_id, session_id=run_id, executor_id="exec-1", metadata=system
                )
                for run_id in run_ids[start : start + 50]
            )
        )
    lost: list[str] = []
    # Named last, so it lands in the second call: its answer is heard too.
    held = [(agent.id, run_id) for run_id in run_ids] + [(agent.id, "never-started")]
    nowhere = grpc.aio.insecure_channel("127.0.0.1:1")  # no orphans are taken: never called
    keeper = LeaseKeeper(
        client,
        OrphanCloser(MemoryClient(nowhere), system_metadata=lambda: system),
        executor_id="exec-1",
        held=lambda: held,
        lose=lost.append,
        interrupt=lambda _run_id: None,
        system_metadata=lambda: system,
        interval_seconds=2.0,
        max_orphans=0,
    )
    try:
        lease_seconds = await keeper.renew()
    finally:
        await nowhere.close()

    assert lease_seconds > 0
    assert lost == ["never-started"]


async def test_a_run_that_ended_while_its_renewal_was_on_its_way_is_not_lost(
    client: RegistryClient, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """The renewal names what the executor held when it was sent; a run whose end was delivered
    before the renewal reached the registry has no lease row any more, and comes back `lost`.
    It was not taken over: the keeper neither stops it nor says so (the 5,000-stream bench logged
    hundreds of such false "taken over" warnings)."""
    agent, system = worker.agent, worker.system
    for run_id in ("ended", "running"):
        await client.start_agent_run(
            agent.id, run_id, session_id=run_id, executor_id="exec-1", metadata=system
        )
    # The end of "ended" reaches the registry before the renewal that still names it.
    await client.finish_agent_run(agent.id, "ended", completed=True, metadata=system)
    snapshots = [[(agent.id, "ended"), (agent.id, "running"), (agent.id, "never-started")]]

    def held() -> list[tuple[str, str]]:
        # What the renewal is sent with, then what is held by the time its answer is read.
        return snapshots.pop(0) if snapshots else [(agent.id, "running"), (agent.id, "never-started")]

    lost: list[str] = []
    running = asyncio.get_running_loop().create_future()  # what the runner hands back: running

    def lose(run_id: str) -> asyncio.Future[None]:
        lost.append(run_id)
        return running

    nowhere = grpc.aio.insecure_channel("127.0.0.1:1")
    keeper = LeaseKeeper(
        client,
        OrphanCloser(MemoryClient(nowhere), system_metadata=lambda: system),
        executor_id="exec-1",
        held=held,
        lose=lose,
        interrupt=lambda _run_id: None,
        system_metadata=lambda: system,
        interval_seconds=2.0,
        max_orphans=0,
    )
    caplog.set_level(logging.WARNING, logger="agentmesh.executor.durability.leases")
    try:
        assert await keeper.renew() > 0
    finally:
        running.cancel()
        await nowhere.close()

    assert lost == ["never-started"], "only a run still held here that the registry does not know is lost"
    assert "ended" not in caplog.text
    assert "run never-started was taken over" in caplog.text


async def test_an_executor_that_renews_nothing_for_a_lease_says_it_is_cut_off_until_it_renews_again(
    client: RegistryClient, worker: Worker, caplog: pytest.LogCaptureFixture
) -> None:
    """Renewals failing for longer than a lease make the keeper report the executor cut off (its
    server then says NOT_SERVING, executor app.py), once; the first answered renewal ends it.
    The registry is unreachable through one channel and answers through the other; the clock is
    the test's."""
    now = [0.0]
    reported: list[bool] = []

    async def on_cut_off(cut_off: bool) -> None:
        reported.append(cut_off)

    nowhere = grpc.aio.insecure_channel("127.0.0.1:1")
    reachable = [False]

    class Registry:
        """The real registry client, or a client of nothing while `reachable` is False."""

        async def renew_run_leases(self, request, **kwargs):
            target = client if reachable[0] else RegistryClient(nowhere)
            return await target.renew_run_leases(request, **kwargs)

    keeper = LeaseKeeper(
        Registry(),  # type: ignore[arg-type]
        OrphanCloser(MemoryClient(nowhere), system_metadata=lambda: worker.system),
        executor_id="exec-1",
        held=lambda: [],
        lose=lambda _run_id: None,
        interrupt=lambda _run_id: None,
        system_metadata=lambda: worker.system,
        interval_seconds=2.0,
        max_orphans=0,
        on_cut_off=on_cut_off,
        monotonic=lambda: now[0],
    )
    try:
        reachable[0] = True
        lease_seconds = await keeper.renew()
        assert lease_seconds > 0 and reported == [] and not keeper.cut_off
        reachable[0] = False
        now[0] += lease_seconds / 2
        assert await keeper.renew() == 0
        assert reported == [], "not cut off before a lease has passed"
        now[0] += lease_seconds
        await keeper.renew()
        await keeper.renew()
        assert reported == [True] and keeper.cut_off, "said once"
        assert "renewed no lease" in caplog.text
        reachable[0] = True
        assert await keeper.renew() > 0
        assert reported == [True, False] and not keeper.cut_off
    finally:
        await nowhere.close()
