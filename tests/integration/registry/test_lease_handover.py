"""A draining executor hands its runs over (registry `leases.py`):
`RenewRunLeasesRequest.released` ends their leases at once, so the next sweep orphans them and
another executor takes them over well within the lease time, instead of after it."""

from __future__ import annotations

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Worker, bearer, rpc_error, violation_fields
from tests.polling import eventually


async def test_released_runs_are_taken_over_within_a_sweep(client: RegistryClient, worker: Worker) -> None:
    agent, system = worker.agent, worker.system
    await client.start_agent_run(agent.id, "handed", session_id="s-1", executor_id="exec-1", metadata=system)
    await client.start_agent_run(agent.id, "kept", session_id="s-2", executor_id="exec-1", metadata=system)

    renewal = await client.renew_run_leases(
        pb.RenewRunLeasesRequest(
            executor_id="exec-1",
            runs=[pb.LeasedRun(agent_id=agent.id, run_id="kept")],
            released=[pb.LeasedRun(agent_id=agent.id, run_id="handed")],
        ),
        metadata=system,
    )
    assert list(renewal.lost) == []
    lease_seconds = renewal.lease_seconds
    taken: list[str] = []

    async def taken_over() -> bool:
        response = await client.renew_run_leases(
            pb.RenewRunLeasesRequest(executor_id="exec-2", max_orphans=16), metadata=system
        )
        taken.extend(orphan.run_id for orphan in response.orphans)
        return bool(taken)

    seconds = await eventually(taken_over, timeout=lease_seconds, what="the released run is taken over")
    assert taken == ["handed"]  # the run it kept is not
    assert seconds < lease_seconds


async def test_a_released_run_without_ids_is_refused_naming_it(
    client: RegistryClient, codec: TokenCodec
) -> None:
    bad = await rpc_error(
        client.renew_run_leases(
            pb.RenewRunLeasesRequest(executor_id="exec-1", released=[pb.LeasedRun(run_id="r")]),
            metadata=bearer(codec.system_token()),
        )
    )
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(bad) == {"released[0]"}
