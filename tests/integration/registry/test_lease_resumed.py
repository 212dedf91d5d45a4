"""An orphan its taker resumes is counted in again (registry `leases.py`):
`RenewRunLeasesRequest.resumed` takes the run back into the agent's books — `working`, one run
in flight — so its end is a normal `FinishAgentRun` that counts its usage and completed task,
once. Only the orphan's holder may resume it; an orphan closed instead stays counted out."""

from __future__ import annotations

import asyncio

import grpc

from agentmesh.executor.durability.leases import LeaseKeeper
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, bearer, rpc_error, violation_fields
from tests.polling import eventually


async def test_a_resumed_orphan_is_counted_in_and_its_end_counts_its_usage_once(
    client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    system = bearer(codec.system_token())
    for run_id in ("resumed", "closed"):
        await client.start_agent_run(agent.id, run_id, session_id="s-1", executor_id="dead", metadata=system)
    # The dead executor's runs are handed over at once (as a drain does) rather than waited for.
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(
            executor_id="dead",
            released=[pb.LeasedRun(agent_id=agent.id, run_id=r) for r in ("resumed", "closed")],
        ),
        metadata=system,
    )
    taken: set[str] = set()

    async def taken_over() -> bool:
        response = await client.renew_run_leases(
            pb.RenewRunLeasesRequest(executor_id="taker", max_orphans=16), metadata=system
        )
        taken.update(orphan.run_id for orphan in response.orphans)
        return len(taken) == 2

    await eventually(taken_over, what="both runs are taken over")

    async def counters() -> tuple[int, int, int]:
        # (runs in flight are not public: the store contract test counts them)
        got = await client.get_agent(project.id, agent.id, metadata=owner.metadata)
        return got.status, got.tasks_completed, got.tokens_used

    assert await counters() == (res.AGENT_STATUS_IDLE, 0, 0)
    resumed = pb.LeasedRun(agent_id=agent.id, run_id="resumed")

    # Another executor cannot resume what it does not hold: it is told so (lost), nothing counted.
    other = await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="other", resumed=[resumed]), metadata=system
    )
    assert [(run.agent_id, run.run_id) for run in other.lost] == [(agent.id, "resumed")]
    assert await counters() == (res.AGENT_STATUS_IDLE, 0, 0)

    for _ in range(2):  # the second is a retry whose first answer was lost: nothing counted twice
        answer = await client.renew_run_leases(
            pb.RenewRunLeasesRequest(executor_id="taker", runs=[resumed], resumed=[resumed]), metadata=system
        )
        assert list(answer.lost) == []
        assert await counters() == (res.AGENT_STATUS_WORKING, 0, 0)
    # The other orphan is closed instead: it stays counted out.
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(
            executor_id="taker", runs=[resumed], closed=[pb.LeasedRun(agent_id=agent.id, run_id="closed")]
        ),
        metadata=system,
    )
    assert await counters() == (res.AGENT_STATUS_WORKING, 0, 0)

    await client.finish_agent_run(
        agent.id, "resumed", completed=True, tokens_used=42, cost=0.25, metadata=system
    )
    await client.finish_agent_run(
        agent.id, "resumed", completed=True, tokens_used=42, cost=0.25, metadata=system
    )
    assert await counters() == (res.AGENT_STATUS_IDLE, 1, 42)
    assert (await client.get_agent(project.id, agent.id, metadata=owner.metadata)).cost == 0.25


async def test_a_resumed_run_without_ids_is_refused_naming_it(
    client: RegistryClient, codec: TokenCodec
) -> None:
    bad = await rpc_error(
        client.renew_run_leases(
            pb.RenewRunLeasesRequest(executor_id="exec-1", resumed=[pb.LeasedRun(agent_id="a")]),
            metadata=bearer(codec.system_token()),
        )
    )
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(bad) == {"resumed[0]"}


async def test_the_keeper_counts_a_resumed_orphan_in_and_stops_it_when_it_loses_it(
    client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    """The executor's side (executor `leases.py`): `LeaseKeeper.count_in` tells the registry the
    orphan it was handed is resumed, and a resumed run whose lease is lost later to another
    executor is stopped like any run (the closer that resumes it still holds it)."""
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    system = bearer(codec.system_token())
    await client.start_agent_run(agent.id, "r", session_id="s-1", executor_id="dead", metadata=system)
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="dead", released=[pb.LeasedRun(agent_id=agent.id, run_id="r")]),
        metadata=system,
    )
    counted_in: list[bool] = []
    going_on = asyncio.Event()
    lost: list[str] = []

    class Resumer:
        async def close(self, orphan: pb.OrphanedRun) -> None:
            counted_in.append(await keeper.count_in(orphan))
            await going_on.wait()  # the resumed run goes on until it is stopped

    def lose(run_id: str) -> None:
        lost.append(run_id)
        going_on.set()

    keeper = LeaseKeeper(
        client,
        Resumer(),
        executor_id="taker",
        held=lambda: [],
        lose=lose,
        interrupt=lambda _run_id: None,
        system_metadata=lambda: system,
        interval_seconds=2.0,
        max_orphans=16,
    )

    async def resumed() -> bool:
        await keeper.renew()
        return counted_in == [True]

    await eventually(resumed, what="the orphan is taken over and counted in")
    status = (await client.get_agent(project.id, agent.id, metadata=owner.metadata)).status
    assert status == res.AGENT_STATUS_WORKING
    # Its lease is ended behind the keeper's back (as if it had been cut off past the lease): the
    # sweep orphans it, another executor takes it, and the keeper's next renewal stops the
    # resumed run.
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="taker", released=[pb.LeasedRun(agent_id=agent.id, run_id="r")]),
        metadata=system,
    )

    async def counted_out() -> bool:
        agent_now = await client.get_agent(project.id, agent.id, metadata=owner.metadata)
        return agent_now.status == res.AGENT_STATUS_IDLE

    await eventually(counted_out, what="the sweep orphans the resumed run again")
    # Handed straight back to the keeper by its next renewal: it goes on here.
    await keeper.renew()
    assert lost == []
    # Taken by another executor: it stops here.
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="taker", released=[pb.LeasedRun(agent_id=agent.id, run_id="r")]),
        metadata=system,
    )
    taken = await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="next", max_orphans=16), metadata=system
    )
    assert [orphan.run_id for orphan in taken.orphans] == ["r"]
    await keeper.renew()
    assert lost == ["r"]
    await keeper.stop()


async def test_a_lost_run_handed_straight_back_is_taken_over_once_it_has_stopped_here(
    client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    """One renewal can tell the keeper both that it lost a run and that it now holds the run as
    an orphan (the sweep expired it and this executor asked first). The orphan is resumed or
    closed only once the lost run has stopped here: its taker reads the log the run stopped
    writing, and the two never record steps side by side."""
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    system = bearer(codec.system_token())
    run = pb.LeasedRun(agent_id=agent.id, run_id="r")
    await client.start_agent_run(agent.id, "r", session_id="s-1", executor_id="taker", metadata=system)
    stopped = asyncio.Event()
    stopping: list[asyncio.Task[None]] = []
    closed_after_stop: list[bool] = []

    class Resumer:
        async def close(self, orphan: pb.OrphanedRun) -> None:
            closed_after_stop.append(stopped.is_set())

    async def until_stopped() -> None:
        await stopped.wait()

    def lose(run_id: str) -> asyncio.Task[None]:
        stopping.append(asyncio.create_task(until_stopped(), name=f"stopping {run_id}"))
        return stopping[-1]

    keeper = LeaseKeeper(
        client,
        Resumer(),
        executor_id="taker",
        held=lambda: [] if stopping else [(agent.id, "r")],
        lose=lose,
        interrupt=lambda _run_id: None,
        system_metadata=lambda: system,
        interval_seconds=2.0,
        max_orphans=16,
    )
    # Its lease is ended behind the keeper's back, as if it had been cut off past the lease.
    await client.renew_run_leases(
        pb.RenewRunLeasesRequest(executor_id="taker", released=[run]), metadata=system
    )

    async def orphaned() -> bool:
        agent_now = await client.get_agent(project.id, agent.id, metadata=owner.metadata)
        return agent_now.status == res.AGENT_STATUS_IDLE

    await eventually(orphaned, what="the sweep orphans the run")
    await keeper.renew()  # lost here, and handed straight back
    assert len(stopping) == 1 and closed_after_stop == []
    await asyncio.sleep(0)  # the close task runs as far as it can: it waits for the stop
    assert closed_after_stop == []
    stopped.set()

    async def closed() -> bool:
        return closed_after_stop == [True]

    await eventually(closed, what="the orphan is taken over once the lost run stopped")
    await keeper.stop()
