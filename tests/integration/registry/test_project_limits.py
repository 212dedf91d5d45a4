"""Project limits over gRPC (DESIGN §12): set by superusers, lowered but never raised by owners,
returned on the project; runs at once refused at admission past the project's limit, or past its
share of the executor pool's run slots when it sets none."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.settings import RegistrySettings
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, Caller, bearer, make_settings, rpc_error, violation_fields

GRPC = grpc.StatusCode


@pytest.fixture
def registry_settings(database_url: str) -> RegistrySettings:
    # A project that sets no runs at once may hold half the pool's run slots.
    return make_settings(database_url, project_share_of_pool=0.5, default_tokens_per_day=1_000_000)


async def _set_limits(
    stub: pb_grpc.RegistryServiceStub, caller: Caller, project_id: str, **limits: int
) -> res.Project:
    request = pb.UpdateProjectRequest(
        project=res.Project(id=project_id, limits=res.ProjectLimits(**limits)),
        update_mask=field_mask_pb2.FieldMask(paths=["limits"]),
    )
    return (await stub.UpdateProject(request, metadata=caller.metadata)).project


async def test_a_superuser_sets_limits_and_the_owner_may_only_lower_them(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    assert not project.limits.HasField("concurrent_runs")  # unset: the operator's default
    root = await api.root()
    limited = await _set_limits(stub, root, project.id, concurrent_runs=4, requests_per_minute=100)
    assert (limited.limits.concurrent_runs, limited.limits.requests_per_minute) == (4, 100)
    got = (await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=owner.metadata)).project
    assert got.limits == limited.limits
    # What applies, as the gateways read it: the project's own, else the operator's default.
    in_force = got.limits_in_force
    assert (in_force.concurrent_runs, in_force.requests_per_minute) == (4, 100)
    assert (in_force.tokens_per_day, in_force.open_streams) == (1_000_000, 0)

    lowered = await _set_limits(stub, owner, project.id, concurrent_runs=2, requests_per_minute=100)
    assert lowered.limits.concurrent_runs == 2
    for raised, field in (
        ({"concurrent_runs": 3, "requests_per_minute": 100}, "concurrent_runs"),
        ({"concurrent_runs": 0, "requests_per_minute": 100}, "concurrent_runs"),  # 0 is unlimited
        ({"concurrent_runs": 2}, "requests_per_minute"),  # unset: the default, unlimited
        ({"concurrent_runs": 2, "requests_per_minute": 100, "tokens_per_day": 2_000_000}, "tokens_per_day"),
    ):
        error = await rpc_error(_set_limits(stub, owner, project.id, **raised))
        assert (error.code, error.reason) == (GRPC.PERMISSION_DENIED, "LIMIT_RAISE_DENIED")
        assert error.metadata["field"] == f"project.limits.{field}"
        assert f"project.limits.{field}" in error.message
    # Under the operator's default of tokens a day, an owner sets a limit of their own.
    own = await _set_limits(
        stub, owner, project.id, concurrent_runs=2, requests_per_minute=1, tokens_per_day=5
    )
    assert own.limits.tokens_per_day == 5
    got = (await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=owner.metadata)).project
    assert got.limits == own.limits

    # An owner may create a project under the defaults, not over them.
    under = await api.project(owner, limits=res.ProjectLimits(tokens_per_day=10))
    assert under.limits.tokens_per_day == 10
    over = await rpc_error(api.project(owner, limits=res.ProjectLimits(tokens_per_day=0)))
    assert (over.code, over.reason) == (GRPC.PERMISSION_DENIED, "LIMIT_RAISE_DENIED")

    negative = await rpc_error(_set_limits(stub, root, project.id, open_streams=-1))
    assert negative.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(negative) == {"project.limits.open_streams"}


async def test_runs_past_the_projects_limit_are_refused_with_retry_and_quota_details(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    first = await api.agent(owner, project, "first")
    second = await api.agent(owner, project, "second")
    other = await api.agent(owner, await api.project(owner), "elsewhere")
    await _set_limits(stub, await api.root(), project.id, concurrent_runs=2)
    md = owner.metadata

    await client.start_agent_run(first.id, "a", metadata=md)
    await client.start_agent_run(second.id, "b", metadata=md)
    await client.start_agent_run(first.id, "a", metadata=md)  # a retried start is no new run
    try:
        await client.internal_stub.StartAgentRun(
            ipb.StartAgentRunRequest(agent_id=second.id, run_id="c"), metadata=md
        )
    except grpc.aio.AioRpcError as error:
        status = rpc_status.from_call(error)
    else:
        raise AssertionError("a third run started")
    assert status is not None and status.code == GRPC.RESOURCE_EXHAUSTED.value[0]
    retry, quota, info = (
        error_details_pb2.RetryInfo(),
        error_details_pb2.QuotaFailure(),
        error_details_pb2.ErrorInfo(),
    )
    unpacked = {type(m).__name__ for m in (retry, quota, info) for d in status.details if d.Unpack(m)}
    assert unpacked == {"RetryInfo", "QuotaFailure", "ErrorInfo"}
    assert info.reason == "QUOTA_EXCEEDED" and retry.retry_delay.seconds >= 1
    assert [(v.subject, "concurrent_runs" in v.description) for v in quota.violations] == [
        (f"project:{project.id}", True)
    ]
    # Nothing of the refused run is left: it is not in flight, its agent counts it nowhere.
    agent = (await stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=second.id), metadata=md)).agent
    assert agent.status == res.AGENT_STATUS_WORKING  # for run b alone
    # Another project is not held back by this one.
    await client.start_agent_run(other.id, "elsewhere", metadata=md)

    await client.finish_agent_run(first.id, "a", completed=True, metadata=md)
    await client.start_agent_run(second.id, "c", metadata=md)
    refused = await rpc_error(client.start_agent_run(first.id, "d", metadata=md))
    assert (refused.code, refused.reason) == (GRPC.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED")
    assert refused.metadata["quota_limit"] == "concurrent_runs"


async def test_a_project_without_a_limit_holds_at_most_its_share_of_the_pool(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, codec: TokenCodec
) -> None:
    system = bearer(codec.system_token())
    await client.register_executor("executor-a", "127.0.0.1:1", run_slots=3, metadata=system)
    await client.register_executor("executor-b", "127.0.0.1:2", run_slots=3, metadata=system)
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata
    for run in ("a", "b", "c"):  # half of the pool's six slots
        await client.start_agent_run(agent.id, run, metadata=md)
    refused = await rpc_error(client.start_agent_run(agent.id, "d", metadata=md))
    assert (refused.code, refused.reason) == (GRPC.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED")
    # An owner may not give the project more than its share either; a superuser may.
    raised = await rpc_error(_set_limits(stub, owner, project.id, concurrent_runs=4))
    assert raised.reason == "LIMIT_RAISE_DENIED"
    await _set_limits(stub, await api.root(), project.id, concurrent_runs=4)
    await client.start_agent_run(agent.id, "d", metadata=md)


async def test_a_project_past_its_tokens_of_the_day_starts_no_run(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    other = await api.agent(owner, await api.project(owner), "elsewhere")
    await _set_limits(stub, await api.root(), project.id, tokens_per_day=100)
    md = owner.metadata

    await client.start_agent_run(agent.id, "a", metadata=md)
    await client.finish_agent_run(agent.id, "a", completed=True, tokens_used=60, metadata=md)
    await client.finish_agent_run(agent.id, "a", completed=True, tokens_used=60, metadata=md)  # retried
    await client.start_agent_run(agent.id, "b", metadata=md)  # 60 of 100
    await client.start_agent_run(other.id, "x", metadata=md)
    batch = [
        ipb.FinishAgentRunRequest(agent_id=agent.id, run_id="b", completed=True, tokens_used=40),
        ipb.FinishAgentRunRequest(agent_id=other.id, run_id="x", completed=True, tokens_used=1000),
    ]
    await client.finish_agent_runs(batch, metadata=md)

    refused = await rpc_error(client.start_agent_run(agent.id, "c", metadata=md))
    assert (refused.code, refused.reason) == (GRPC.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED")
    assert refused.metadata["quota_limit"] == "tokens_per_day"
    assert refused.metadata["quota_subject"] == f"project:{project.id}"
    assert 1 <= int(refused.metadata["retry_after_seconds"]) <= 86_400
    await client.start_agent_run(other.id, "y", metadata=md)  # the other project is under its own
    # A superuser lifts it: the run starts.
    await _set_limits(stub, await api.root(), project.id, tokens_per_day=0)
    await client.start_agent_run(agent.id, "c", metadata=md)
