"""Sign-in and registration through the gateway's public faces: the gateway hands the registry the
client address it saw (here: the one a trusted proxy names in X-Forwarded-For), so a guesser's
address is locked out of an account while its owner, elsewhere, signs in over REST and gRPC alike;
superusers issue, list and revoke invitations over REST, and an invite-only registry takes them."""

from __future__ import annotations

import grpc
import httpx

from agentmesh.cli.mesh import Mesh, load_settings, start_service
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.support import PASSWORD, Api, suffix
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD

GUESSER = "198.51.100.77"
OWNER = "203.0.113.77"
LOGIN_MAX_FAILURES = 5  # the registry's default


def _from(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def test_a_guesser_locks_only_its_own_address_out_on_rest_and_grpc(mesh: Mesh, api: Api) -> None:
    owner = await api.user()
    gateway = await start_gateway(mesh, trusted_proxies=["127.0.0.0/8"])
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as http:

            async def login(email: str, password: str, address: str) -> int:
                body = {"email": email, "password": password}
                return (await http.post("/api/v1/auth/login", json=body, headers=_from(address))).status_code

            unknown = f"ghost-{suffix()}@example.com"
            for email in (owner.email, unknown):
                statuses = [
                    await login(email, "wrong password 0", GUESSER) for _ in range(LOGIN_MAX_FAILURES)
                ]
                assert statuses == [401] * LOGIN_MAX_FAILURES
                assert await login(email, "wrong password 0", GUESSER) == 429  # unknown e-mails alike
            assert await login(owner.email, PASSWORD, GUESSER) == 429
            assert await login(owner.email, PASSWORD, OWNER) == 200

        async with grpc.aio.insecure_channel(gateway.address) as channel:
            stub = reg_grpc.RegistryServiceStub(channel)
            request = reg.LoginRequest(email=owner.email, password=PASSWORD)
            try:
                await stub.Login(request, metadata=(("x-forwarded-for", GUESSER),))
                raise AssertionError("the guesser's address was let in")
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            await stub.Login(request, metadata=(("x-forwarded-for", OWNER),))
    finally:
        await gateway.stop(grace_seconds=0)


async def test_superusers_issue_list_and_revoke_invitations_that_an_invite_only_registry_takes(
    mesh: Mesh, http: httpx.AsyncClient, api: Api, once: None
) -> None:
    admin, member = await api.admin(), await api.user()
    refused = await http.post("/api/v1/invitations", json={}, headers=member.headers)
    assert refused.status_code == 403
    created = await http.post("/api/v1/invitations", json={"ttl_seconds": 3600}, headers=admin.headers)
    assert created.status_code == 201, created.text
    invitation = created.json()
    assert invitation["token"].startswith("ami_") and invitation["used_at"] is None
    spare = (await http.post("/api/v1/invitations", json={}, headers=admin.headers)).json()
    revoked = await http.delete(f"/api/v1/invitations/{spare['id']}", headers=admin.headers)
    assert revoked.status_code == 200
    listed = (await http.get("/api/v1/invitations", headers=admin.headers)).json()
    by_id = {item["id"]: item for item in listed["data"]}
    assert by_id[spare["id"]]["revoked_at"] is not None and "token" not in by_id[invitation["id"]]

    # A registry of the same mesh that is invite-only, behind a gateway of its own.
    registry = await start_service(
        "registry",
        load_settings(
            "registry",
            host="127.0.0.1",
            port=0,
            jwt_secret=JWT_SECRET,
            database_url=mesh.services["registry"].settings.database_url,  # type: ignore[attr-defined]
            superuser_email=SUPERUSER_EMAIL,
            superuser_password=SUPERUSER_PASSWORD,
            registration_mode="invite-only",
        ),
    )
    gateway = await start_gateway(mesh, registry_address=registry.address)
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as invited:
            body = {"email": f"invited-{suffix()}@example.com", "password": PASSWORD}
            without = await invited.post("/api/v1/auth/register", json=body)
            assert without.status_code == 403 and "invitation" in without.text
            for token, status in (
                (invitation["token"], 201),
                (invitation["token"], 403),
                (spare["token"], 403),
            ):
                answer = await invited.post("/api/v1/auth/register", json={**body, "invitation_token": token})
                assert answer.status_code == status, answer.text
                body["email"] = f"invited-{suffix()}@example.com"
    finally:
        await gateway.stop(grace_seconds=0)
        await registry.stop(0)


async def test_a_closed_registry_refuses_sign_ups_and_each_address_is_limited(mesh: Mesh, once: None) -> None:
    """A registry whose operator closed registration answers 403 ("registration is closed") over REST;
    the gateway in front counts sign-ups per client address (2 here): past them, 429 with
    Retry-After over REST and RESOURCE_EXHAUSTED over gRPC, for that address only."""
    registry = await start_service(
        "registry",
        load_settings(
            "registry",
            host="127.0.0.1",
            port=0,
            jwt_secret=JWT_SECRET,
            database_url=mesh.services["registry"].settings.database_url,  # type: ignore[attr-defined]
            registration_mode="closed",
        ),
    )
    gateway = await start_gateway(
        mesh,
        registry_address=registry.address,
        trusted_proxies=["127.0.0.0/8"],
        registration_max_per_address=2,
    )
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as http:
            body = {"email": f"closed-{suffix()}@example.com", "password": PASSWORD}
            for _ in range(2):
                closed = await http.post("/api/v1/auth/register", json=body, headers=_from(GUESSER))
                assert closed.status_code == 403 and "registration is closed" in closed.text, closed.text
            limited = await http.post("/api/v1/auth/register", json=body, headers=_from(GUESSER))
            assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0, limited.text
            elsewhere = await http.post("/api/v1/auth/register", json=body, headers=_from(OWNER))
            assert elsewhere.status_code == 403, elsewhere.text
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            request = reg.RegisterUserRequest(email=body["email"], password=PASSWORD)
            try:
                await reg_grpc.RegistryServiceStub(channel).RegisterUser(
                    request, metadata=(("x-forwarded-for", GUESSER),)
                )
                raise AssertionError("the address past its sign-ups was let in")
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
    finally:
        await gateway.stop(grace_seconds=0)
        await registry.stop(0)
