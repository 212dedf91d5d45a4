"""Runs parked on runs below them (deep requests, registry `runs/run_waits.py`): a delegated run
that waits for a person suspends with its request, its caller suspends waiting on it (no request
of its own), and the caller is handed out only once the run below has ended — after the answer
resumed that one. Driven as executors drive it, on SQLite and PostgreSQL."""

from __future__ import annotations

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Worker, rpc_error, violation_fields
from tests.integration.registry.test_input_requests import answer, question, renew, started, status


async def park_on(client: RegistryClient, worker: Worker, run_id: str, *children: str) -> None:
    await client.suspend_run(
        worker.agent.id, run_id, executor_id="exec-x", requests=[], waits_on=children, metadata=worker.system
    )


async def test_a_caller_waits_on_its_suspended_run_and_goes_on_once_that_one_ended(
    client: RegistryClient, worker: Worker
) -> None:
    for run_id in ("top", "mid", "low"):
        await started(client, worker, run_id)
    await client.suspend_run(
        worker.agent.id, "low", executor_id="exec-x", requests=[question("low-q")], metadata=worker.system
    )
    await park_on(client, worker, "mid", "low")
    await park_on(client, worker, "top", "mid")
    assert await status(client, worker) == res.AGENT_STATUS_WAITING
    assert list((await renew(client, worker, "exec-y")).orphans) == []

    # The answer hands out the run that asked, and only it.
    await client.respond_to_input_request(
        worker.project.id, "low-q", answer("yes"), metadata=worker.owner.metadata
    )
    (low,) = (await renew(client, worker, "exec-y")).orphans
    assert low.run_id == "low"
    assert list((await renew(client, worker, "exec-z")).orphans) == []

    # Its end hands out its caller; the caller's end, the top.
    leased = internal_pb.LeasedRun(agent_id=worker.agent.id, run_id="low")
    await renew(client, worker, "exec-y", runs=[leased], resumed=[leased])
    await client.finish_agent_run(worker.agent.id, "low", completed=True, metadata=worker.system)
    (mid,) = (await renew(client, worker, "exec-z")).orphans
    assert (mid.run_id, list(mid.input_requests)) == ("mid", [])
    assert list((await renew(client, worker, "exec-y")).orphans) == []
    leased = internal_pb.LeasedRun(agent_id=worker.agent.id, run_id="mid")
    await renew(client, worker, "exec-z", runs=[leased], resumed=[leased])
    await client.finish_agent_runs(
        [internal_pb.FinishAgentRunRequest(agent_id=worker.agent.id, run_id="mid", completed=True)],
        metadata=worker.system,
    )
    (top,) = (await renew(client, worker, "exec-y")).orphans
    assert top.run_id == "top"


async def test_a_caller_parked_on_a_run_that_ended_already_is_due_at_once(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "caller")
    await started(client, worker, "quick")
    await client.finish_agent_run(worker.agent.id, "quick", completed=True, metadata=worker.system)
    await park_on(client, worker, "caller", "quick")
    (orphan,) = (await renew(client, worker, "exec-y")).orphans
    assert orphan.run_id == "caller"


async def test_a_suspension_needs_a_request_or_another_run_to_wait_on(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "lonely")
    error = await rpc_error(park_on(client, worker, "lonely"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and violation_fields(error) == {"input_requests"}
    error = await rpc_error(park_on(client, worker, "lonely", "lonely"))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(error) == {"waits_on_run_ids[0]"}
    assert await status(client, worker) == res.AGENT_STATUS_WORKING
