"""Revocation reaches the internal ports: a signed-out user's token, a deactivated user's and the
token a gateway signs for an API key are refused by the registry, memory and the executor, not
only at the gateway, once the registry records the revocation — polled, within a few seconds
(each verifier asks the registry at most once a second per user and key: runtime/revocation.py).
The caller here holds a service credential: what an attacker who captured one, and a token, on an
internal network would hold."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.internal.executor.v1 import executor_service_pb2 as executor_pb
from agentmesh.internal.executor.v1 import executor_service_pb2_grpc as executor_grpc
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as registry_internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as registry_internal_grpc
from agentmesh.memory.v1 import memory_service_pb2 as memory_pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as memory_grpc
from agentmesh.registry.v1 import registry_service_pb2 as registry_pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as registry_grpc
from agentmesh.runtime.errors import TOKEN_REVOKED
from agentmesh.runtime.identity import Principal, TokenCodec
from tests.bearer import service_channel
from tests.integration.test_service_identity import _reason
from tests.mesh import JWT_SECRET, MeshClient, bearer
from tests.polling import eventually

PORTS = ("registry", "memory", "executor")


@pytest.fixture
async def channels(mesh: Mesh) -> AsyncIterator[dict[str, grpc.aio.Channel]]:
    opened = {name: service_channel(mesh.services[name].address) for name in PORTS}
    yield opened
    for channel in opened.values():
        await channel.close()


def _calls(channels: dict[str, grpc.aio.Channel], token: str) -> dict[str, object]:
    """One call on every port that verifies tokens, each with `token`: answered (or NOT_FOUND)
    while the token stands."""
    metadata = bearer(token)
    return {
        "registry": registry_grpc.RegistryServiceStub(channels["registry"]).GetCurrentUser(
            registry_pb.GetCurrentUserRequest(), metadata=metadata
        ),
        "registry internal": registry_internal_grpc.RegistryInternalServiceStub(
            channels["registry"]
        ).ResolveAgent(
            registry_internal_pb.ResolveAgentRequest(project_slug="p", agent_name="a"), metadata=metadata
        ),
        "memory": memory_grpc.MemoryServiceStub(channels["memory"]).ListEvents(
            memory_pb.ListEventsRequest(session_id="s", project_id="p"), metadata=metadata
        ),
        "executor": executor_grpc.ExecutorServiceStub(channels["executor"]).GetStats(
            executor_pb.GetStatsRequest(), metadata=metadata
        ),
    }


async def _refused_everywhere(channels: dict[str, grpc.aio.Channel], token: str) -> bool:
    """True when every port refuses `token` as revoked; False while any still admits it."""
    refused = 0
    for name, call in _calls(channels, token).items():
        try:
            await call
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                assert _reason(error) == TOKEN_REVOKED, (name, error.details())
                refused += 1
    return refused == len(PORTS) + 1


async def _admitted_everywhere(channels: dict[str, grpc.aio.Channel], token: str) -> None:
    for name, call in _calls(channels, token).items():
        try:
            await call
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, (name, error.code(), error.details())


# The store's part (a key by id, a user) is the same query on both databases: the contract tests
# hold it; one mesh on SQLite is enough here.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_revoked_tokens_are_refused_on_every_internal_port(
    client: MeshClient, channels: dict[str, grpc.aio.Channel]
) -> None:
    await client.registry.RegisterUser(
        registry_pb.RegisterUserRequest(email="eve@example.com", password="eve-password-1")
    )
    signed_in = await client.registry.Login(
        registry_pb.LoginRequest(email="eve@example.com", password="eve-password-1")
    )
    token = signed_in.tokens.access_token
    eve = TokenCodec(JWT_SECRET).verify(token)
    created = await client.registry.CreateApiKey(
        registry_pb.CreateApiKeyRequest(name="ci"), metadata=bearer(token)
    )
    # The token a gateway signs for the key's calls behind it (the key itself never leaves it).
    key_token = TokenCodec(JWT_SECRET).issue(
        Principal(
            eve.user_id, email=eve.email, token_version=eve.token_version, api_key_id=created.api_key.id
        )
    )
    await _admitted_everywhere(channels, token)
    await _admitted_everywhere(channels, key_token)

    await client.registry.RevokeApiKey(
        registry_pb.RevokeApiKeyRequest(id=created.api_key.id), metadata=bearer(token)
    )
    await eventually(lambda: _refused_everywhere(channels, key_token), timeout=5, what="the key revoked")
    await _admitted_everywhere(channels, token)  # the user's own sign-in still stands

    await client.registry.RevokeRefreshToken(
        registry_pb.RevokeRefreshTokenRequest(refresh_token=signed_in.tokens.refresh_token)
    )
    await eventually(lambda: _refused_everywhere(channels, token), timeout=5, what="signed out")
