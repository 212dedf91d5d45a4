"""API keys end to end through the gateway: made and listed over REST and gRPC, accepted wherever
an access token is (REST, the OpenAI API plain and streamed, gRPC metadata), scoped to a project
when asked, refused once revoked or expired, and never shown again, echoed or logged."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from tests.integration.gateway.a2a_client import a2a_client, fetch_card, send_request
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.support import Api, User
from tests.mesh import bearer
from tests.polling import eventually

KEY_SHAPE = re.compile(r"^amk_[A-Za-z0-9_-]{43}$")


def key_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def create_key(http: httpx.AsyncClient, owner: User, **fields: object) -> dict:
    response = await http.post("/api/v1/api-keys", json={"name": "ci", **fields}, headers=owner.headers)
    assert response.status_code == 201, response.text
    return response.json()


async def test_a_key_is_shown_once_listed_without_its_secret_and_works_on_every_face(
    http: httpx.AsyncClient, mesh: Mesh, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    agent = await api.agent(mock_responses=["hello from a key"])
    created = await create_key(http, agent.owner, name="deploy bot")
    key = created["key"]
    assert KEY_SHAPE.match(key)
    assert created["prefix"] == key[:12] and created["name"] == "deploy bot"
    assert created["project_id"] is None and created["expires_at"] is None and created["revoked_at"] is None

    listed = await http.get("/api/v1/api-keys", headers=agent.owner.headers)
    assert listed.status_code == 200
    assert [k["id"] for k in listed.json()["data"]] == [created["id"]]
    assert key not in listed.text and "key" not in listed.json()["data"][0]

    # REST.
    me = await http.get("/api/v1/users/me", headers=key_headers(key))
    assert me.status_code == 200 and me.json()["email"] == agent.owner.email
    # The OpenAI API, plain and streamed (SSE).
    openai = AsyncOpenAI(base_url=f"{mesh.gateway.http.url}/v1", api_key=key, max_retries=0)
    completion = await openai.chat.completions.create(
        model=agent.model, messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "hello from a key"
    stream = await openai.chat.completions.create(
        model=agent.model, messages=[{"role": "user", "content": "again"}], stream=True
    )
    assert (
        "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "hello from a key"
    )
    # gRPC metadata.
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        registry = reg_grpc.RegistryServiceStub(channel)
        user = await registry.GetCurrentUser(reg.GetCurrentUserRequest(), metadata=bearer(key))
        assert user.user.email == agent.owner.email
        chat = await gw_grpc.GatewayServiceStub(channel).Chat(
            gw.ChatRequest(agent=agent.model, message="hi"), metadata=bearer(key)
        )
        assert chat.content == "hello from a key"
        keys = await registry.ListApiKeys(reg.ListApiKeysRequest(), metadata=bearer(agent.owner.token))
        assert [k.prefix for k in keys.api_keys] == [key[:12]]
    # A2A, with the official client: the card offers the key as a scheme of its own.
    card = await fetch_card(http, agent)
    assert set(card.security_schemes) == {"bearer", "apiKey"}
    async with a2a_client(card, "JSONRPC", key, streaming=False) as client:
        [response] = [r async for r in client.send_message(send_request("hi"))]
        assert response.task.artifacts[0].parts[0].text == "hello from a key"

    assert key not in caplog.text


async def test_keys_are_made_over_grpc_and_are_each_users_own(
    http: httpx.AsyncClient, mesh: Mesh, api: Api, once: None
) -> None:
    owner, other = await api.user(), await api.user()
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        registry = reg_grpc.RegistryServiceStub(channel)
        created = await registry.CreateApiKey(
            reg.CreateApiKeyRequest(name="grpc"), metadata=bearer(owner.token)
        )
        assert KEY_SHAPE.match(created.secret) and created.api_key.prefix == created.secret[:12]
        listed = await registry.ListApiKeys(reg.ListApiKeysRequest(), metadata=bearer(other.token))
        assert list(listed.api_keys) == []
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await registry.RevokeApiKey(
                reg.RevokeApiKeyRequest(id=created.api_key.id), metadata=bearer(other.token)
            )
        assert raised.value.code() is grpc.StatusCode.NOT_FOUND
        # The internal RPC is not a user's to call, with a token or with the key itself: the
        # gateway does not serve it.
        internal = internal_grpc.RegistryInternalServiceStub(channel)
        for credential in (owner.token, created.secret):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await internal.AuthenticateApiKey(
                    internal_pb.AuthenticateApiKeyRequest(secret=created.secret), metadata=bearer(credential)
                )
            assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
    me = await http.get("/api/v1/users/me", headers=key_headers(created.secret))
    assert me.json()["email"] == owner.email


async def test_a_revoked_key_is_refused_within_a_second(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    created = await create_key(http, owner)
    key = created["key"]
    assert (await http.get("/api/v1/users/me", headers=key_headers(key))).status_code == 200

    revoked = await http.delete(f"/api/v1/api-keys/{created['id']}", headers=owner.headers)
    assert revoked.status_code == 200

    async def refused() -> bool:
        return (await http.get("/api/v1/users/me", headers=key_headers(key))).status_code == 401

    assert await eventually(refused, timeout=5, what="revoked key refused") < 3
    answer = await http.get("/api/v1/users/me", headers=key_headers(key))
    assert answer.json()["detail"] == "API key is unknown or revoked"
    assert 'reason="API_KEY_INVALID"' in answer.headers["www-authenticate"]
    listed = (await http.get("/api/v1/api-keys", headers=owner.headers)).json()["data"]
    assert listed[0]["revoked_at"] is not None


async def test_a_scoped_key_touches_its_project_only(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=["scoped"])
    other_project = await api.project(agent.owner)
    key = (await create_key(http, agent.owner, project_id=agent.project_id))["key"]
    headers = key_headers(key)

    assert (await http.get(f"/api/v1/projects/{agent.project_id}/agents", headers=headers)).status_code == 200
    chat = await http.post(
        "/v1/chat/completions",
        json={"model": agent.model, "messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )
    assert chat.status_code == 200, chat.text
    # Another of the owner's projects, by id and by slug, looks like no project at all.
    assert (await http.get(f"/api/v1/projects/{other_project['id']}", headers=headers)).status_code == 404
    elsewhere = await http.get(f"/agents/{other_project['slug']}/assistant/health", headers=headers)
    assert elsewhere.status_code == 404
    # What concerns no project (or every project) is refused, making keys included.
    for method, path in (("GET", "/api/v1/projects"), ("POST", "/api/v1/api-keys")):
        refused = await http.request(
            method, path, json={"name": "x"} if method == "POST" else None, headers=headers
        )
        assert refused.status_code == 403, (path, refused.text)
        assert "scoped to one project" in refused.json()["detail"]
    assert (await http.get("/api/v1/users/me", headers=headers)).status_code == 200


async def test_bad_keys_get_a_clear_401_that_never_echoes_them(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    owner = await api.user()
    malformed = "amk_short-" + "s3cr3t"
    unknown = "amk_" + "A" * 43
    for key, message in ((malformed, "malformed API key"), (unknown, "API key is unknown or revoked")):
        answer = await http.get("/api/v1/users/me", headers=key_headers(key))
        assert answer.status_code == 401
        assert message in answer.json()["detail"] and key not in answer.text
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    expired = await http.post(
        "/api/v1/api-keys", json={"name": "old", "expires_at": past}, headers=owner.headers
    )
    assert expired.status_code == 422 and "expires_at" in expired.text
    nameless = await http.post("/api/v1/api-keys", json={"name": " "}, headers=owner.headers)
    assert nameless.status_code == 422 and "name" in nameless.text
    foreign = await http.post(
        "/api/v1/api-keys",
        json={"name": "x", "project_id": (await api.project(await api.user()))["id"]},
        headers=owner.headers,
    )
    assert foreign.status_code == 404


async def test_a_key_expires(http: httpx.AsyncClient, api: Api, once: None) -> None:
    owner = await api.user()
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    key = (await create_key(http, owner, expires_at=soon))["key"]
    assert (await http.get("/api/v1/users/me", headers=key_headers(key))).status_code == 200

    async def refused() -> bool:
        answer = await http.get("/api/v1/users/me", headers=key_headers(key))
        return answer.status_code == 401 and answer.json()["detail"] == "API key expired"

    await eventually(refused, timeout=10, what="expired key refused")


async def test_guessing_keys_is_throttled_per_client(mesh: Mesh, api: Api, once: None) -> None:
    owner = await api.user()
    gateway = await start_gateway(mesh, failed_api_key_burst=3, failed_api_key_rate_per_second=0.01)
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as http:
            good = (await create_key(http, owner))["key"]
            statuses = [
                (await http.get("/api/v1/users/me", headers=key_headers(f"amk_{n:043d}"))).status_code
                for n in range(5)
            ]
            assert statuses == [401, 401, 401, 429, 429]
            throttled = await http.get("/api/v1/users/me", headers=key_headers("amk_" + "B" * 43))
            assert throttled.status_code == 429 and "retry-after" in throttled.headers
            # Signed-in users are not held up by a guesser's failures: tokens are not keys.
            assert (await http.get("/api/v1/users/me", headers=owner.headers)).status_code == 200
            assert good not in throttled.text
    finally:
        await gateway.stop(grace_seconds=0)
