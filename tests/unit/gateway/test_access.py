"""The policy interceptor on a real gRPC server with a tiny policy: roles, tokens, rate limit, and
refusal of anything without a rule."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import wrappers_pb2

from agentmesh.gateway.access import AccessGuard, AuthorizationInterceptor, current_caller
from agentmesh.gateway.credentials import CredentialVerifier
from agentmesh.gateway.policy import AUTHENTICATED, PUBLIC, SUPERUSER, SYSTEM
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.runtime.identity import Principal, TokenCodec
from agentmesh.runtime.revocation import CredentialStatus, RevocationCheck
from agentmesh.runtime.server import ServiceBinding, start_server

SECRET = "unit-test-secret-" + "x" * 32
SERVICE = "test.Echo"
POLICY = {
    f"/{SERVICE}/Public": PUBLIC,
    f"/{SERVICE}/SignedIn": AUTHENTICATED,
    f"/{SERVICE}/Admin": SUPERUSER,
    f"/{SERVICE}/Internal": SYSTEM,
}


async def whoami(
    request: wrappers_pb2.StringValue, context: grpc.aio.ServicerContext
) -> wrappers_pb2.StringValue:
    return wrappers_pb2.StringValue(value=current_caller().user_id or "nobody")


def handlers() -> grpc.GenericRpcHandler:
    handler = grpc.unary_unary_rpc_method_handler(
        whoami,
        request_deserializer=wrappers_pb2.StringValue.FromString,
        response_serializer=wrappers_pb2.StringValue.SerializeToString,
    )
    names = ("Public", "SignedIn", "Admin", "Internal", "Unlisted")
    return grpc.method_handlers_generic_handler(SERVICE, dict.fromkeys(names, handler))


async def everyone_active(user_id: str, api_key_id: str) -> CredentialStatus:
    """The registry's answer for the revocation check: every user exists, is active, at version 0."""
    return CredentialStatus(user_active=True, token_version=0, api_key_active=True)


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    tokens = TokenCodec(SECRET)
    guard = AccessGuard(
        credentials=CredentialVerifier(
            tokens=tokens,
            registry=None,  # type: ignore[arg-type]  # no API keys here
            system_metadata=lambda: None,
            failed_keys=RateLimiter(rate_per_second=1, burst=5),
            revocation=RevocationCheck(everyone_active),
        ),
        registry=None,  # type: ignore[arg-type]  # no project rules in this policy
        memory=None,  # type: ignore[arg-type]
        limiter=RateLimiter(rate_per_second=0.001, burst=5),
    )
    server = await start_server(
        [ServiceBinding(SERVICE, lambda s: s.add_generic_rpc_handlers((handlers(),)))],
        interceptors=[AuthorizationInterceptor(guard, POLICY)],
    )
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield channel
    await server.stop(0)


async def call(channel: grpc.aio.Channel, method: str, token: str | None = None) -> str:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    stub = channel.unary_unary(
        f"/{SERVICE}/{method}",
        request_serializer=wrappers_pb2.StringValue.SerializeToString,
        response_deserializer=wrappers_pb2.StringValue.FromString,
    )
    return (await stub(wrappers_pb2.StringValue(), metadata=metadata)).value


async def code_of(channel: grpc.aio.Channel, method: str, token: str | None = None) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(channel, method, token)
    return raised.value.code()


async def test_each_role_gets_what_the_policy_gives(channel: grpc.aio.Channel) -> None:
    tokens = TokenCodec(SECRET)
    user = tokens.issue(Principal("ada"))
    admin = tokens.issue(Principal("root", is_superuser=True))
    assert await call(channel, "Public") == "nobody"
    assert await call(channel, "Public", user) == "nobody"  # public calls act as nobody
    assert await code_of(channel, "SignedIn") == grpc.StatusCode.UNAUTHENTICATED
    assert await code_of(channel, "SignedIn", "forged") == grpc.StatusCode.UNAUTHENTICATED
    assert await call(channel, "SignedIn", user) == "ada"
    assert await code_of(channel, "Admin", user) == grpc.StatusCode.PERMISSION_DENIED
    assert await call(channel, "Admin", admin) == "root"
    assert await code_of(channel, "Internal", admin) == grpc.StatusCode.PERMISSION_DENIED
    assert await call(channel, "Internal", tokens.system_token()) == "system"


async def test_a_method_without_a_rule_is_refused(channel: grpc.aio.Channel) -> None:
    admin = TokenCodec(SECRET).issue(Principal("root", is_superuser=True))
    assert await code_of(channel, "Unlisted", admin) == grpc.StatusCode.PERMISSION_DENIED


async def test_the_rate_limit_is_per_user(channel: grpc.aio.Channel) -> None:
    tokens = TokenCodec(SECRET)
    busy, calm = tokens.issue(Principal("busy")), tokens.issue(Principal("calm"))
    for _ in range(5):
        await call(channel, "SignedIn", busy)
    assert await code_of(channel, "SignedIn", busy) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await call(channel, "SignedIn", calm) == "calm"
