"""An executor holding more runs than one RenewRunLeases call may name (the registry takes 1,000)
renews them all, in several calls, against a real registry on SQLite and PostgreSQL (found by
issue 16's 5,000-stream bench: one refused call renewed none, and every run was orphaned)."""

from __future__ import annotations

import asyncio

import grpc

from agentmesh.executor.leases import MAX_RUNS_PER_RENEWAL, LeaseKeeper, OrphanCloser
from agentmesh.memory.client import MemoryClient
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, bearer

HELD = MAX_RUNS_PER_RENEWAL + 150


async def test_more_runs_than_one_call_takes_are_all_renewed(
    client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    system = bearer(codec.system_token())
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
