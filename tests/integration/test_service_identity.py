"""Service identity: the internal ports answer only the mesh's own services.

Every RPC of an internal service (the registry's RegistryInternalService, both of memory's
services, the executor) needs a service credential in `x-agentmesh-service` metadata; without one,
or with a forged, expired or wrong-kind one, it is UNAUTHENTICATED with a reason saying which —
even for a caller holding a valid user (or system) access token. Health and reflection stay open,
and the mesh, which `start_mesh` wires with credentials on its own, works.
"""

from __future__ import annotations

import time

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from agentmesh.cli.mesh import Mesh
from agentmesh.internal.executor.v1 import executor_service_pb2 as executor_pb
from agentmesh.internal.executor.v1 import executor_service_pb2_grpc as executor_grpc
from agentmesh.internal.memory.v1 import memory_internal_service_pb2 as memory_internal_pb
from agentmesh.internal.memory.v1 import memory_internal_service_pb2_grpc as memory_internal_grpc
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as registry_internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as registry_internal_grpc
from agentmesh.memory.v1 import memory_service_pb2 as memory_pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as memory_grpc
from agentmesh.registry.v1 import registry_service_pb2 as registry_pb
from agentmesh.runtime.identity import TOKEN_MISSING, TokenCodec
from agentmesh.runtime.service_identity import (
    SERVICE_CREDENTIAL,
    SERVICE_CREDENTIAL_INVALID,
    SERVICE_CREDENTIAL_MISSING,
    ServiceCredentials,
)
from tests.bearer import service_channel, system_metadata
from tests.mesh import JWT_SECRET, MeshClient, bearer

OTHER_SECRET = "another-mesh-secret-" + "y" * 40


def _reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    assert status is not None, error.details()
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    raise AssertionError(f"no ErrorInfo in {error.details()!r}")


async def _refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        result = call
        if hasattr(result, "__aiter__"):
            async for _ in result:
                pass
        else:
            await result
    return caught.value


def _internal_calls(mesh: Mesh, channels: dict[str, grpc.aio.Channel], metadata) -> dict[str, object]:
    """One call of every internal service, each carrying `metadata` only."""
    registry = registry_internal_grpc.RegistryInternalServiceStub(channels["registry"])
    memory = memory_grpc.MemoryServiceStub(channels["memory"])
    memory_internal = memory_internal_grpc.MemoryInternalServiceStub(channels["memory"])
    executor = executor_grpc.ExecutorServiceStub(channels["executor"])
    return {
        "registry ResolveAgent": registry.ResolveAgent(
            registry_internal_pb.ResolveAgentRequest(project_slug="p", agent_name="a"), metadata=metadata
        ),
        "registry ListExecutors": registry.ListExecutors(
            registry_internal_pb.ListExecutorsRequest(), metadata=metadata
        ),
        "registry ResolveMcpServers": registry.ResolveMcpServers(
            registry_internal_pb.ResolveMcpServersRequest(agent_id="x"), metadata=metadata
        ),
        "memory ListEvents": memory.ListEvents(
            memory_pb.ListEventsRequest(session_id="s"), metadata=metadata
        ),
        "memory WatchEvents": memory.WatchEvents(
            memory_pb.WatchEventsRequest(session_id="s", project_id="p"), metadata=metadata
        ),
        "memory DeleteProjectSessions": memory_internal.DeleteProjectSessions(
            memory_internal_pb.DeleteProjectSessionsRequest(project_id="p"), metadata=metadata
        ),
        "memory EraseRun": memory_internal.EraseRun(
            memory_internal_pb.EraseRunRequest(project_id="p", session_id="s", run_id="r"), metadata=metadata
        ),
        "executor GetStats": executor.GetStats(executor_pb.GetStatsRequest(), metadata=metadata),
        "executor Run": executor.Run(
            executor_pb.RunRequest(project_slug="p", agent_name="a", session_id="s", input="hi"),
            metadata=metadata,
        ),
    }


@pytest.fixture
async def plain_channels(mesh: Mesh):
    channels = {
        name: grpc.aio.insecure_channel(mesh.services[name].address)
        for name in ("registry", "memory", "executor")
    }
    yield channels
    for channel in channels.values():
        await channel.close()


@pytest.fixture
async def user_token(client: MeshClient) -> str:
    await client.registry.RegisterUser(
        registry_pb.RegisterUserRequest(email="eve@example.com", password="eve-password-1")
    )
    return await client.login("eve@example.com", "eve-password-1")


async def test_a_caller_without_a_service_credential_is_refused_whatever_token_it_holds(
    mesh: Mesh, plain_channels: dict[str, grpc.aio.Channel], user_token: str
) -> None:
    for metadata in ((), bearer(user_token), system_metadata()):
        for name, call in _internal_calls(mesh, plain_channels, metadata).items():
            error = await _refused(call)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (name, error.details())
            assert _reason(error) == SERVICE_CREDENTIAL_MISSING, name
            assert "service credential" in error.details(), name


async def test_forged_expired_and_wrong_kind_credentials_are_refused(
    mesh: Mesh, plain_channels: dict[str, grpc.aio.Channel], user_token: str
) -> None:
    expired = ServiceCredentials(
        JWT_SECRET, service="gateway", ttl_seconds=60, clock=lambda: time.time() - 3600
    )
    bad = {
        # Signed with another mesh's secret.
        "foreign": ServiceCredentials(OTHER_SECRET, service="gateway").credential(),
        # Expired an hour ago.
        "expired": expired.credential(),
        # A user's access token, signed with the mesh's secret itself: not a service credential.
        "user token": user_token,
        # A system token is an access token too.
        "system token": TokenCodec(JWT_SECRET).system_token(),
        "garbage": "not-a-credential",
    }
    for kind, credential in bad.items():
        metadata = ((SERVICE_CREDENTIAL, credential), *system_metadata())
        for name, call in _internal_calls(mesh, plain_channels, metadata).items():
            error = await _refused(call)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (kind, name, error.details())
            assert _reason(error) == SERVICE_CREDENTIAL_INVALID, (kind, name)


async def test_a_service_credential_is_no_access_token(client: MeshClient) -> None:
    """The other way round: a service credential presented as a bearer token gets nothing."""
    credential = ServiceCredentials(JWT_SECRET, service="gateway").credential()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.registry.GetCurrentUser(registry_pb.GetCurrentUserRequest(), metadata=bearer(credential))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_with_a_credential_a_service_still_acts_only_as_the_caller_it_names(
    mesh: Mesh, user_token: str
) -> None:
    """The credential admits a service; what it may do is still decided by the token it carries:
    a user's token does not reach what only the system principal may."""
    async with service_channel(mesh.services["registry"].address) as channel:
        registry = registry_internal_grpc.RegistryInternalServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await registry.ResolveMcpServers(
                registry_internal_pb.ResolveMcpServersRequest(agent_id="x"), metadata=bearer(user_token)
            )
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        without_token = await _refused(registry.ListExecutors(registry_internal_pb.ListExecutorsRequest()))
        assert without_token.code() == grpc.StatusCode.UNAUTHENTICATED
        listed = await registry.ListExecutors(
            registry_internal_pb.ListExecutorsRequest(), metadata=system_metadata()
        )
        assert [e.address for e in listed.executors] == [mesh.services["executor"].address]


async def test_every_internal_service_wants_a_callers_token_besides_the_credential(mesh: Mesh) -> None:
    """The same authentication interceptor guards the executor as the registry and memory: a
    call with the service credential but no caller's token is refused the same way."""
    channels = {
        name: service_channel(mesh.services[name].address) for name in ("registry", "memory", "executor")
    }
    try:
        for name, call in _internal_calls(mesh, channels, metadata=()).items():
            error = await _refused(call)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, (name, error.details())
            assert _reason(error) == TOKEN_MISSING, name
    finally:
        for channel in channels.values():
            await channel.close()


async def test_health_and_reflection_stay_open(mesh: Mesh) -> None:
    for name in ("registry", "memory", "executor"):
        async with grpc.aio.insecure_channel(mesh.services[name].address) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
            reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = reflection.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")])
            )
            services = [s.name async for answer in answers for s in answer.list_services_response.service]
            assert any(s.startswith("agentmesh.internal.") for s in services), (name, services)


async def test_the_mesh_works_with_credentials_it_wires_itself(client: MeshClient) -> None:
    """`start_mesh` (what `agentmesh up` runs) gives every service the credential: a chat goes
    gateway → executor → registry and memory, all internal calls admitted."""
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=["admitted"])
    events = await client.stream_chat(seeded, "hello")
    assert events[-1].event.HasField("run_completed"), events[-1]
    texts = "".join(e.event.text_delta.text for e in events if e.event.HasField("text_delta"))
    assert texts == "admitted"
