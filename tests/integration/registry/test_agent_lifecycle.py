"""The lifecycle of an agent over gRPC (DESIGN §3): pausing, resuming, terminating, and the runs
that move an agent between idle and working: usage counts, overlap, validation and batched
finishes."""

from __future__ import annotations

import asyncio

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.errors import FailedPrecondition, NotFound
from tests.integration.registry.support import (
    IDLE,
    PAUSED,
    TERMINATED,
    WORKING,
    Api,
    Caller,
    rpc_error,
    violation_fields,
)

GRPC = grpc.StatusCode


async def test_lifecycle(stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    ids = {"project_id": project.id, "id": agent.id}
    md = owner.metadata

    async def status() -> int:
        return (await stub.GetAgent(pb.GetAgentRequest(**ids), metadata=md)).agent.status

    # idle → paused → idle
    assert (await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)).agent.status == PAUSED
    paused_twice = await rpc_error(stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md))
    assert (paused_twice.code, paused_twice.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")
    assert (await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)).agent.status == IDLE
    not_paused = await rpc_error(stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md))
    assert (not_paused.code, not_paused.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")

    # idle ⇄ working while a run is in flight; working → paused → (resume) working, then idle.
    started = await client.start_agent_run(agent.id, "run-1", metadata=md)
    assert started.agent.status == WORKING
    assert (await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)).agent.status == PAUSED
    refused = await rpc_error(client.start_agent_run(agent.id, "run-2", metadata=md))
    assert (refused.code, refused.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_PAUSED")
    assert (await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)).agent.status == WORKING
    finished = await client.finish_agent_run(agent.id, "run-1", completed=True, metadata=md)
    assert finished.status == IDLE

    # any → terminated (final)
    deleted = await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=md)
    assert deleted.message == "agent 'worker' terminated"
    assert await status() == TERMINATED
    for call in (
        stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md),
        stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")
    try:
        await client.start_agent_run(agent.id, "run-3", metadata=md)
        raise AssertionError("a terminated agent started a run")
    except FailedPrecondition as error:
        assert error.reason == "AGENT_TERMINATED"
    # Terminating again changes nothing.
    await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=md)
    assert await status() == TERMINATED
    # Its name stays taken, unless a new agent asks to replace it: then the terminated one gives
    # its name and slug up and keeps its id; a live agent's name stays taken even so.
    taken = await rpc_error(api.agent(owner, project, "worker"))
    assert taken.reason == "AGENT_NAME_TAKEN"
    new = pb.CreateAgentRequest(
        agent=res.Agent(project_id=project.id, agent_type_id=agent.agent_type_id, name="worker"),
        replace_terminated=True,
    )
    again = (await stub.CreateAgent(new, metadata=md)).agent
    assert (again.name, again.slug, again.status) == ("worker", "worker", IDLE) and again.id != agent.id
    old = (await stub.GetAgent(pb.GetAgentRequest(**ids), metadata=md)).agent
    assert (old.status, old.name) == (TERMINATED, f"worker (terminated {agent.id.replace('-', '')[:12]})")
    live = await rpc_error(stub.CreateAgent(new, metadata=md))
    assert live.reason == "AGENT_NAME_TAKEN"


async def test_paused_agents_can_be_terminated(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    ids = {"project_id": project.id, "id": agent.id}
    await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=owner.metadata)
    await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=owner.metadata)
    got = await stub.GetAgent(pb.GetAgentRequest(**ids), metadata=owner.metadata)
    assert got.agent.status == TERMINATED


async def test_runs_count_usage_and_overlap(
    api: Api, client: RegistryClient, stub: pb_grpc.RegistryServiceStub
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata

    assert (await client.start_agent_run(agent.id, "a", metadata=md)).agent.status == WORKING
    assert (await client.start_agent_run(agent.id, "b", metadata=md)).agent.status == WORKING
    # A retried start is counted once.
    assert (await client.start_agent_run(agent.id, "b", metadata=md)).agent.status == WORKING
    after_a = await client.finish_agent_run(
        agent.id, "a", completed=True, tokens_used=100, cost=0.5, metadata=md
    )
    assert after_a.status == WORKING  # b is still running
    after_b = await client.finish_agent_run(
        agent.id, "b", completed=False, tokens_used=20, cost=0.25, metadata=md
    )
    assert after_b.status == IDLE
    assert (after_b.tasks_completed, after_b.tokens_used, after_b.cost) == (1, 120, 0.75)
    # A retried finish adds nothing.
    again = await client.finish_agent_run(
        agent.id, "b", completed=True, tokens_used=20, cost=0.25, metadata=md
    )
    assert (again.tasks_completed, again.tokens_used, again.cost, again.status) == (1, 120, 0.75, IDLE)
    assert again.last_activity_at.ToDatetime() >= agent.last_activity_at.ToDatetime()

    metrics = await stub.GetAgentMetrics(
        pb.GetAgentMetricsRequest(project_id=project.id, id=agent.id), metadata=md
    )
    assert metrics == pb.GetAgentMetricsResponse(
        total_instances=1,
        active_instances=0,
        idle_instances=1,
        total_tasks_completed=1,
        total_tokens_used=120,
        total_cost_incurred=0.75,
    )
    await client.start_agent_run(agent.id, "c", metadata=md)
    working = await stub.GetAgentMetrics(
        pb.GetAgentMetricsRequest(project_id=project.id, id=agent.id), metadata=md
    )
    assert (working.active_instances, working.idle_instances) == (1, 0)

    # Finishing after termination adds the usage but the agent stays terminated.
    await stub.DeleteAgent(pb.DeleteAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    final = await client.finish_agent_run(agent.id, "c", completed=True, tokens_used=5, metadata=md)
    assert (final.status, final.tasks_completed, final.tokens_used) == (TERMINATED, 2, 125)


async def test_run_calls_validate(
    api: Api, stub: pb_grpc.RegistryServiceStub, client: RegistryClient, internal_stub
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata
    error = await rpc_error(
        internal_stub.StartAgentRun(ipb.StartAgentRunRequest(agent_id=agent.id), metadata=md)
    )
    assert violation_fields(error) == {"run_id"}
    error = await rpc_error(
        internal_stub.FinishAgentRun(
            ipb.FinishAgentRunRequest(agent_id=agent.id, run_id="r", tokens_used=-1, cost=-0.1), metadata=md
        )
    )
    assert violation_fields(error) == {"tokens_used", "cost"}
    try:
        await client.start_agent_run("no-such-agent", "r", metadata=md)
        raise AssertionError("started a run of a missing agent")
    except NotFound as missing:
        assert missing.reason == "AGENT_NOT_FOUND"


async def test_concurrent_runs_are_all_counted(api: Api, client: RegistryClient) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata
    runs = [f"run-{i}" for i in range(10)]
    await asyncio.gather(*(client.start_agent_run(agent.id, run, metadata=md) for run in runs))
    finished = await asyncio.gather(
        *(client.finish_agent_run(agent.id, run, completed=True, tokens_used=10, metadata=md) for run in runs)
    )
    assert sum(a.status == IDLE for a in finished) == 1  # only the last one leaves it idle
    final = await client.finish_agent_run(agent.id, "run-0", completed=True, metadata=md)  # a retry
    assert (final.status, final.tasks_completed, final.tokens_used) == (IDLE, 10, 100)


async def test_finish_agent_runs_finishes_each_run_on_its_own(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, internal_stub
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    first = await api.agent(owner, project, "first")
    second = await api.agent(owner, project, "second")
    md = owner.metadata
    for agent, run in ((first, "a"), (first, "b"), (second, "c")):
        await client.start_agent_run(agent.id, run, metadata=md)

    def run(agent_id: str, run_id: str, **usage: object) -> ipb.FinishAgentRunRequest:
        return ipb.FinishAgentRunRequest(agent_id=agent_id, run_id=run_id, completed=True, **usage)

    batch = [
        run(first.id, "a", tokens_used=10, cost=0.5),
        run("no-such-agent", "x"),
        run(second.id, "c", tokens_used=-1),
        run(first.id, "b", tokens_used=5),
        run(second.id, "c", tokens_used=7),
    ]
    results = await client.finish_agent_runs(batch, metadata=md)
    assert [(r.error_code, r.error_reason) for r in results] == [
        ("", ""),
        ("NOT_FOUND", "AGENT_NOT_FOUND"),
        ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        ("", ""),
        ("", ""),
    ]
    assert "tokens_used" in results[2].error_message
    assert not results[1].HasField("agent")
    assert (results[0].agent.status, results[3].agent.status, results[4].agent.status) == (
        WORKING,
        IDLE,
        IDLE,
    )
    assert (results[3].agent.tasks_completed, results[3].agent.tokens_used) == (2, 15)

    # A retried batch changes nothing; another caller's agents are not found.
    again = await client.finish_agent_runs(batch[:1] + batch[3:], metadata=md)
    assert [r.agent.tokens_used for r in again] == [15, 15, 7]
    stranger = await api.sign_up()
    (hidden,) = await client.finish_agent_runs([run(first.id, "z")], metadata=stranger.metadata)
    assert hidden.error_code == "NOT_FOUND"

    too_many = ipb.FinishAgentRunsRequest(runs=[run(first.id, f"r{i}") for i in range(1001)])
    error = await rpc_error(internal_stub.FinishAgentRuns(too_many, metadata=md))
    assert error.code == GRPC.INVALID_ARGUMENT and violation_fields(error) == {"runs"}
