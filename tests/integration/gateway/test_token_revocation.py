"""Tokens stop working when what they stand for changes, on every gateway replica:
two gateways share one registry; the change is made through one and the other refuses the old
token within a bound (each gateway asks the registry at most once a second per user)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.runtime.errors import from_rpc_error
from tests.integration.gateway.conftest import LOOP, start_gateway
from tests.integration.gateway.support import PASSWORD, Api, User
from tests.mesh import bearer
from tests.polling import eventually

# Revocation takes effect within the check interval (1 s); the bound leaves room for a loaded box.
BOUND_SECONDS = 5.0


@pytest_asyncio.fixture(loop_scope=LOOP)
async def other(mesh: Mesh) -> AsyncIterator[httpx.AsyncClient]:
    """A second gateway replica in front of the same registry."""
    gateway = await start_gateway(mesh)
    async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as client:
        client.grpc_address = gateway.address  # type: ignore[attr-defined]
        yield client
    await gateway.stop(grace_seconds=0)


async def refused_within_bound(
    http: httpx.AsyncClient, headers: dict[str, str], path: str = "/api/v1/users/me"
) -> httpx.Response:
    async def refused() -> bool:
        return (await http.get(path, headers=headers)).status_code == 401

    await eventually(refused, timeout=BOUND_SECONDS, what=f"{path} refused on the other gateway")
    return await http.get(path, headers=headers)


async def test_logout_revokes_the_access_token_on_every_gateway(
    http: httpx.AsyncClient, other: httpx.AsyncClient, api: Api
) -> None:
    user = await api.user()
    assert (await other.get("/api/v1/users/me", headers=user.headers)).status_code == 200

    logout = await http.post("/api/v1/auth/logout", json={"refresh_token": user.refresh_token})
    assert logout.status_code == 200

    answer = await refused_within_bound(other, user.headers)
    assert 'reason="TOKEN_REVOKED"' in answer.headers["www-authenticate"]
    assert "revoked" in answer.json()["detail"]
    # Over gRPC too, with the reason in the status.
    async with grpc.aio.insecure_channel(other.grpc_address) as channel:  # type: ignore[attr-defined]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await reg_grpc.RegistryServiceStub(channel).GetCurrentUser(
                reg.GetCurrentUserRequest(), metadata=bearer(user.token)
            )
    assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert from_rpc_error(raised.value).reason == "TOKEN_REVOKED"
    # Signing in again works.
    again = await api.login(user.email, PASSWORD)
    assert (await other.get("/api/v1/users/me", headers=again.headers)).status_code == 200


async def test_a_reused_refresh_token_revokes_the_access_tokens(
    http: httpx.AsyncClient, other: httpx.AsyncClient, api: Api, once: None
) -> None:
    user = await api.user()
    rotated = await http.post("/api/v1/auth/refresh", json={"refresh_token": user.refresh_token})
    assert rotated.status_code == 200
    fresh = {"Authorization": f"Bearer {rotated.json()['access_token']}"}
    reused = await http.post("/api/v1/auth/refresh", json={"refresh_token": user.refresh_token})
    assert reused.status_code == 401
    await refused_within_bound(other, fresh)


async def test_a_deactivated_user_loses_tokens_and_api_keys(
    http: httpx.AsyncClient, other: httpx.AsyncClient, api: Api
) -> None:
    admin = await api.admin()
    user = await api.user()
    key = (await http.post("/api/v1/api-keys", json={"name": "bot"}, headers=user.headers)).json()["key"]
    key_headers = {"Authorization": f"Bearer {key}"}
    me = (await other.get("/api/v1/users/me", headers=user.headers)).json()
    assert (await other.get("/api/v1/users/me", headers=key_headers)).status_code == 200

    deactivated = await http.patch(
        f"/api/v1/users/{me['id']}", json={"is_active": False}, headers=admin.headers
    )
    assert deactivated.status_code == 200 and deactivated.json()["is_active"] is False

    await refused_within_bound(other, user.headers)
    answer = await refused_within_bound(other, key_headers)
    assert key not in answer.text
    login = await other.post("/api/v1/auth/login", json={"email": user.email, "password": PASSWORD})
    assert login.status_code == 401

    reactivated = await http.patch(
        f"/api/v1/users/{me['id']}", json={"is_active": True}, headers=admin.headers
    )
    assert reactivated.status_code == 200

    async def key_works_again() -> bool:
        return (await other.get("/api/v1/users/me", headers=key_headers)).status_code == 200

    await eventually(key_works_again, timeout=BOUND_SECONDS, what="the key of a reactivated user")
    # The old access token stays revoked: reactivation is a change too.
    answer = await refused_within_bound(other, user.headers)
    assert 'reason="TOKEN_REVOKED"' in answer.headers["www-authenticate"]


async def test_a_demoted_superuser_loses_superuser_powers(
    http: httpx.AsyncClient, other: httpx.AsyncClient, api: Api
) -> None:
    admin = await api.admin()
    user = await api.user()
    user_id = (await http.get("/api/v1/users/me", headers=user.headers)).json()["id"]
    promoted = await http.patch(
        f"/api/v1/users/{user_id}", json={"is_superuser": True}, headers=admin.headers
    )
    assert promoted.status_code == 200 and promoted.json()["is_superuser"] is True
    power = await api.login(user.email, PASSWORD)
    assert (await other.get("/api/v1/mcp-servers", headers=power.headers)).status_code == 200

    demoted = await http.patch(
        f"/api/v1/users/{user_id}", json={"is_superuser": False}, headers=admin.headers
    )
    assert demoted.status_code == 200
    await refused_within_bound(other, power.headers, "/api/v1/mcp-servers")
    plain = await api.login(user.email, PASSWORD)
    assert (await other.get("/api/v1/mcp-servers", headers=plain.headers)).status_code == 403


async def test_updating_users_is_for_superusers_and_never_oneself(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    admin = await api.admin()
    user: User = await api.user()
    user_id = (await http.get("/api/v1/users/me", headers=user.headers)).json()["id"]
    admin_id = (await http.get("/api/v1/users/me", headers=admin.headers)).json()["id"]

    forbidden = await http.patch(
        f"/api/v1/users/{user_id}", json={"is_superuser": True}, headers=user.headers
    )
    assert forbidden.status_code == 403
    yourself = await http.patch(
        f"/api/v1/users/{admin_id}", json={"is_superuser": False}, headers=admin.headers
    )
    assert yourself.status_code == 400 and "yourself" in yourself.json()["detail"]
    assert (await http.get("/api/v1/users/me", headers=admin.headers)).status_code == 200
    unknown = await http.patch(
        "/api/v1/users/00000000-0000-0000-0000-000000000000", json={"is_active": False}, headers=admin.headers
    )
    assert unknown.status_code == 404
    null = await http.patch(f"/api/v1/users/{user_id}", json={"is_active": None}, headers=admin.headers)
    assert null.status_code == 422 and "is_active" in null.text  # never taken for false
    empty = await http.patch(f"/api/v1/users/{user_id}", json={}, headers=admin.headers)
    assert empty.status_code == 422 and "is_active or is_superuser" in empty.text
