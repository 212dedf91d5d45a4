"""Limits at the edge: body size, message count and size, the per-user rate limit, forged tokens —
each with the right status and a clear message, the gateway serving on afterwards."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import grpc
import httpx
import jwt
import openai
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.runtime.service import RunningService
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.support import Api
from tests.mesh import JWT_SECRET, bearer


@pytest_asyncio.fixture(loop_scope="package")
async def strict_gateway(mesh: Mesh, once: None) -> AsyncIterator[RunningService]:
    """A gateway with small limits in front of the shared mesh."""
    gateway = await start_gateway(
        mesh,
        max_request_body_bytes=4096,
        max_chat_messages=3,
        max_chat_message_bytes=1000,
        rate_limit_per_second=0.5,
        rate_limit_burst=3,
    )
    yield gateway
    await gateway.stop(0)


async def test_oversized_bodies_get_413_in_each_routes_shape(
    strict_gateway: RunningService, api: Api
) -> None:
    user = await api.user()
    async with httpx.AsyncClient(base_url=strict_gateway.http.url) as http:  # type: ignore[attr-defined]
        big = {"name": "x" * 5000, "slug": "big"}
        rest = await http.post("/api/v1/projects", json=big, headers=user.headers)
        assert rest.status_code == 413
        assert "4096" in rest.json()["detail"]
        chat = await http.post(
            "/v1/chat/completions",
            json={"model": "p/a", "messages": [{"role": "user", "content": "x" * 5000}]},
            headers=user.headers,
        )
        assert chat.status_code == 413
        assert chat.json()["error"]["code"] == "request_too_large"

        async def body() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"x" * 1024

        # No Content-Length: the body is counted as it arrives.
        chunked = await http.post(
            "/api/v1/projects", content=body(), headers={**user.headers, "Content-Type": "application/json"}
        )
        assert chunked.status_code == 413


async def test_message_count_and_size_limits(strict_gateway: RunningService, api: Api) -> None:
    agent = await api.agent(mock_responses=["small talk"])
    async with httpx.AsyncClient(base_url=strict_gateway.http.url) as http:  # type: ignore[attr-defined]
        url = f"{agent.base}/v1/chat/completions"
        many = await http.post(
            url, json={"messages": [{"role": "user", "content": "hi"}] * 4}, headers=agent.owner.headers
        )
        assert many.status_code == 413
        assert many.json()["error"]["param"] == "messages"
        large = await http.post(
            url, json={"messages": [{"role": "user", "content": "y" * 1500}]}, headers=agent.owner.headers
        )
        assert large.status_code == 413
        assert large.json()["error"]["param"] == "messages[0].content"
    async with grpc.aio.insecure_channel(strict_gateway.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await gw_grpc.GatewayServiceStub(channel).Chat(
                gw.ChatRequest(agent=agent.model, message="z" * 1500), metadata=bearer(agent.owner.token)
            )
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_per_user_rate_limit_answers_429_with_retry_after(
    strict_gateway: RunningService, api: Api
) -> None:
    limited, other = await api.user(), await api.user()
    async with httpx.AsyncClient(base_url=strict_gateway.http.url) as http:  # type: ignore[attr-defined]
        statuses = [
            (await http.get("/api/v1/users/me", headers=limited.headers)).status_code for _ in range(3)
        ]
        assert statuses == [200, 200, 200]
        refused = await http.get("/api/v1/users/me", headers=limited.headers)
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert "rate limit" in refused.json()["detail"]
        # Per user: someone else is not affected.
        assert (await http.get("/api/v1/users/me", headers=other.headers)).status_code == 200

    client = AsyncOpenAI(base_url=f"{strict_gateway.http.url}/v1", api_key=limited.token, max_retries=0)  # type: ignore[attr-defined]
    with pytest.raises(openai.RateLimitError):
        await client.models.list()

    async with grpc.aio.insecure_channel(strict_gateway.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await gw_grpc.GatewayServiceStub(channel).Chat(
                gw.ChatRequest(agent="p/a", message="hi"), metadata=bearer(limited.token)
            )
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "retry in" in (raised.value.details() or "")


def _forged_tokens() -> list[str]:
    now = int(time.time())
    claims = {"sub": "someone", "su": True, "iss": "agentmesh", "iat": now, "exp": now + 600, "typ": "access"}
    return [
        jwt.encode(claims, "another-secret-that-is-long-enough-to-sign", algorithm="HS256"),
        jwt.encode({**claims, "exp": now - 10}, JWT_SECRET, algorithm="HS256"),  # expired
        jwt.encode({**claims, "typ": "refresh"}, JWT_SECRET, algorithm="HS256"),  # not an access token
        jwt.encode(claims, None, algorithm="none"),  # alg=none
        "not-even-a-jwt",
    ]


async def test_forged_tokens_are_refused_everywhere(
    http: httpx.AsyncClient, mesh: Mesh, api: Api, once: None
) -> None:
    agent = await api.agent()
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = gw_grpc.GatewayServiceStub(channel)
        for token in _forged_tokens():
            headers = {"Authorization": f"Bearer {token}"}
            assert (await http.get("/api/v1/projects", headers=headers)).status_code == 401
            chat = await http.post(
                "/v1/chat/completions",
                json={"model": agent.model, "messages": [{"role": "user", "content": "hi"}]},
                headers=headers,
            )
            assert chat.status_code == 401
            assert chat.json()["error"]["code"] == "invalid_api_key"
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.Chat(gw.ChatRequest(agent=agent.model, message="hi"), metadata=bearer(token))
            assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    assert (await http.get("/readyz")).json()["status"] == "ready"


async def test_openapi_and_docs_describe_every_route(http: httpx.AsyncClient, once: None) -> None:
    schema = (await http.get("/openapi.json")).json()
    operations = [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 35
    for path, method, operation in operations:
        ok = next(str(status) for status in operation["responses"] if str(status).startswith("2"))
        content = operation["responses"][ok].get("content", {})
        assert any("schema" in media for media in content.values()), (method, path)
    docs = await http.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


async def test_the_docs_pages_work_offline(http: httpx.AsyncClient, once: None) -> None:
    # Every script and stylesheet the pages load is served by the gateway itself, not a CDN.
    for page in ("/docs", "/redoc"):
        html = await http.get(page)
        assert html.status_code == 200, page
        assets = re.findall(r"""(?:src|href)=["']([^"']+\.(?:js|css))["']""", html.text)
        assert assets, html.text
        for asset in assets:
            assert asset.startswith("/"), f"{page} loads {asset} from elsewhere"
            served = await http.get(asset)
            assert served.status_code == 200 and len(served.content) > 10_000, asset
