"""Session turns through the registry's gRPC API (double texting; registry `turns.py`): a run
started with `double_texting` is its session's next turn; under reject a busy session refuses it
(ABORTED SESSION_BUSY naming the run in flight) and nothing stays started; AwaitSessionTurn tells
a waiting run when its turn has come; an interrupted run's executor hears it on its renewal; bad
requests are refused naming the field."""

from __future__ import annotations

import asyncio

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Worker, rpc_error, violation_fields


async def test_turns_through_the_api(client: RegistryClient, worker: Worker) -> None:
    owner, project, agent, system = worker.owner, worker.project, worker.agent, worker.system

    async def start(run_id: str, policy: str, executor: str = "exec-1") -> pb.StartAgentRunResponse:
        return await client.start_agent_run(
            agent.id, run_id, session_id="s-1", executor_id=executor, double_texting=policy, metadata=system
        )

    assert list((await start("first", "enqueue")).runs_ahead) == []
    busy = await rpc_error(start("second", "reject"))
    assert (busy.code, busy.reason) == (grpc.StatusCode.ABORTED, "SESSION_BUSY")
    assert busy.metadata["run_id"] == "first" and "first" in busy.message
    # The refused run is not in flight: the agent counts the first one only.
    got = await client.get_agent(project.id, agent.id, metadata=owner.metadata)
    assert got.status == res.AGENT_STATUS_WORKING
    assert list((await start("third", "interrupt", "exec-2")).runs_ahead) == ["first"]
    assert await client.await_session_turn(agent.id, "third", wait_seconds=0, metadata=system) == ["first"]

    renewal = await client.renew_run_leases(
        pb.RenewRunLeasesRequest(
            executor_id="exec-1", runs=[pb.LeasedRun(agent_id=agent.id, run_id="first")]
        ),
        metadata=system,
    )
    assert [run.run_id for run in renewal.interrupted] == ["first"]

    waiting = asyncio.create_task(
        client.await_session_turn(agent.id, "third", wait_seconds=10, metadata=system)
    )
    await client.finish_agent_run(agent.id, "first", completed=False, metadata=system)
    assert await waiting == []
    finished = await client.finish_agent_run(agent.id, "third", completed=True, metadata=system)
    assert finished.status == res.AGENT_STATUS_IDLE and finished.tasks_completed == 1


async def test_bad_turn_requests_are_refused_naming_the_field(client: RegistryClient, worker: Worker) -> None:
    owner, project, agent, system = worker.owner, worker.project, worker.agent, worker.system
    bad = await rpc_error(
        client.start_agent_run(agent.id, "r", session_id="s", double_texting="later", metadata=system)
    )
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and violation_fields(bad) == {"double_texting"}
    bad = await rpc_error(client.start_agent_run(agent.id, "r", double_texting="reject", metadata=system))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and violation_fields(bad) == {"session_id"}
    bad = await rpc_error(client.await_session_turn("", "", wait_seconds=-1, metadata=system))
    assert violation_fields(bad) == {"agent_id", "run_id", "wait_seconds"}
    # Executors only.
    denied = await rpc_error(
        client.await_session_turn(agent.id, "r", wait_seconds=0, metadata=owner.metadata)
    )
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED
    # An agent's policy must be one of the three.
    changed = res.Agent(
        project_id=project.id, id=agent.id, config=res.AgentConfig(double_texting="sometimes")
    )
    refused = await rpc_error(
        client.update_agent(changed, ["config.double_texting"], metadata=owner.metadata)
    )
    assert violation_fields(refused) == {"agent.config.double_texting"}
    changed.config.double_texting = "reject"
    updated = await client.update_agent(changed, ["config.double_texting"], metadata=owner.metadata)
    assert updated.config.double_texting == "reject"
