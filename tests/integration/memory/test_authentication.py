"""The memory service authenticates every caller as the registry does: without a valid bearer
access token (a user's or a service's system token, signed with the mesh's secret) every RPC is
UNAUTHENTICATED; health and reflection stay open."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import SecretStr

from agentmesh.memory.app import SERVICE
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.settings import MemorySettings
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.identity import Principal, TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel
from tests.integration.memory.builders import new_event
from tests.mesh import JWT_SECRET, bearer

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

METHODS = [method.name for method in SERVICE.methods]


def _call(channel: grpc.aio.Channel, name: str, request, metadata) -> grpc.aio.Call:
    method = SERVICE.methods_by_name[name]
    response_type = getattr(pb, method.output_type.name)
    path = f"/{SERVICE.full_name}/{name}"
    kwargs = {
        "request_serializer": type(request).SerializeToString,
        "response_deserializer": response_type.FromString,
    }
    if method.server_streaming:
        return channel.unary_stream(path, **kwargs)(request, metadata=metadata, timeout=30)
    return channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=30)


async def _code(call: grpc.aio.Call) -> tuple[grpc.StatusCode, str]:
    try:
        if isinstance(call, grpc.aio.UnaryStreamCall):
            async for _ in call:
                pass
        else:
            await call
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details()
    return grpc.StatusCode.OK, ""


def _request(name: str, *, session_id: str):
    """The RPC's request, naming the session where the request has a session."""
    request_type = getattr(pb, SERVICE.methods_by_name[name].input_type.name)
    if "session_id" in request_type.DESCRIPTOR.fields_by_name:
        return request_type(session_id=session_id)
    return request_type()


FORGED = [
    ("missing", ()),
    ("not a JWT", bearer("x.y.z")),
    ("another secret", bearer(TokenCodec("another-secret-" + "z" * 32).system_token())),
    ("another scheme", (("authorization", f"Basic {TokenCodec(JWT_SECRET).system_token()}"),)),
]


@pytest.mark.parametrize(("label", "metadata"), FORGED, ids=[label for label, _ in FORGED])
async def test_every_rpc_refuses_a_caller_without_a_valid_token(
    memory_service: RunningService, memory: MemoryClient, label: str, metadata
) -> None:
    await memory.append_events("s-secret", "p-1", [new_event("private")])
    async with grpc.aio.insecure_channel(memory_service.address) as channel:
        for name in METHODS:
            request = _request(name, session_id="s-secret")
            code, details = await _code(_call(channel, name, request, metadata))
            assert code == grpc.StatusCode.UNAUTHENTICATED, (name, label, code, details)
            assert "private" not in details


async def test_a_valid_user_or_system_token_is_served(
    memory_service: RunningService, memory: MemoryClient
) -> None:
    await memory.append_events("s-1", "p-1", [new_event("hello")])
    user_token = TokenCodec(JWT_SECRET).issue(Principal(user_id="u-1", email="u@example.com"))
    for token in (user_token, TokenCodec(JWT_SECRET).system_token()):
        async with authorized_channel(memory_service.address, token) as channel:
            listed = await MemoryClient(channel).list_events(pb.ListEventsRequest(session_id="s-1"))
        assert [event.content for event in listed.events] == ["hello"]


async def test_health_needs_no_token(memory_service: RunningService) -> None:
    async with grpc.aio.insecure_channel(memory_service.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE.full_name), timeout=30
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_service_does_not_start_without_a_secret(memory_settings: MemorySettings) -> None:
    from agentmesh.memory.app import start

    with pytest.raises(ValueError, match="JWT secret"):
        await start(memory_settings.model_copy(update={"jwt_secret": SecretStr("")}))
