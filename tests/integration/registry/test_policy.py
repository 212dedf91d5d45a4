"""Every registry RPC is covered by the policy table, and every non-public one refuses callers
without a valid token."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.registry.policy import POLICY, SERVICE
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.runtime.identity import Access, AuthenticationInterceptor, TokenCodec
from agentmesh.runtime.service import RunningService
from tests.integration.registry.support import JWT_SECRET, bearer, rpc_error

METHODS = [method.name for method in SERVICE.methods]


def test_every_rpc_has_a_policy() -> None:
    assert set(POLICY) == set(METHODS)


def test_the_interceptor_refuses_an_incomplete_table() -> None:
    incomplete = {name: access for name, access in POLICY.items() if name != "DeleteAgent"}
    with pytest.raises(ValueError, match="DeleteAgent"):
        AuthenticationInterceptor(TokenCodec(JWT_SECRET), SERVICE, incomplete)


def _call(channel: grpc.aio.Channel, name: str) -> grpc.aio.UnaryUnaryCall:
    method = SERVICE.methods_by_name[name]
    request_type = getattr(pb, method.input_type.name)
    response_type = getattr(pb, method.output_type.name)
    return channel.unary_unary(
        f"/{SERVICE.full_name}/{name}",
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_protected_rpcs_refuse_missing_and_bad_tokens(
    registry_service: RunningService, channel: grpc.aio.Channel
) -> None:
    protected = [name for name in METHODS if POLICY[name] is not Access.PUBLIC]
    assert len(protected) > 20
    for name in protected:
        request = getattr(pb, SERVICE.methods_by_name[name].input_type.name)()
        missing = await rpc_error(_call(channel, name)(request))
        assert (missing.code, missing.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_MISSING"), name
        forged = await rpc_error(_call(channel, name)(request, metadata=bearer("x.y.z")))
        assert (forged.code, forged.reason) == (grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID"), name


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_public_rpcs_need_no_token(registry_service: RunningService, channel: grpc.aio.Channel) -> None:
    public = [name for name in METHODS if POLICY[name] is Access.PUBLIC]
    assert set(public) == {"RegisterUser", "Login", "RefreshTokens", "RevokeRefreshToken"}
    for name in public:
        request = getattr(pb, SERVICE.methods_by_name[name].input_type.name)()
        error = await rpc_error(_call(channel, name)(request))
        # Empty requests are invalid, but they get past authentication.
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT, name


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_health_and_reflection_need_no_token(
    registry_service: RunningService, channel: grpc.aio.Channel
) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE.full_name))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
