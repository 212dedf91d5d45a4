"""The project limits the gateway counts itself (docs/tenants.md): a project's requests a minute
and its streams open at once, and the operator's cap on one user's open streams — refused on
every face as every quota is (gRPC RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure, HTTP 429
with Retry-After, OpenAI's `rate_limit_exceeded` on `/v1`). None of it depends on the database:
each test runs once, on projects of its own with small limits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.support import Agent, Api, a2a_jsonrpc, suffix
from tests.mesh import bearer
from tests.polling import eventually


async def _limited_agent(api: Api, **limits: int) -> Agent:
    """An agent in a project of its own whose limits a superuser set before anything else named
    it (so the agent's creation is the project's first request)."""
    owner, admin = await api.user(), await api.admin()
    project = await api.project(owner)
    if limits:
        set_ = await api.http.patch(
            f"/api/v1/projects/{project['id']}", json={"limits": limits}, headers=admin.headers
        )
        assert set_.status_code == 200, set_.text
    return await api.agent(owner, project=project, mock_responses=["ok"] * 20)


def _agents(agent: Agent) -> str:
    return f"/api/v1/projects/{agent.project_id}/agents"


async def _list_agents(api: Api, agent: Agent) -> int:
    return (await api.http.get(_agents(agent), headers=agent.owner.headers)).status_code


def _openai(mesh: Mesh, agent: Agent, base_url: str = "") -> AsyncOpenAI:
    url = base_url or mesh.gateway.http.url
    return AsyncOpenAI(base_url=f"{url}{agent.base}/v1", api_key=agent.owner.token, max_retries=0)


async def _stream_chat(stub: gw_grpc.GatewayServiceStub, agent: Agent, session_id: str = "") -> None:
    request = gw.StreamChatRequest(agent=agent.model, message="hi", session_id=session_id)
    async for _ in stub.StreamChat(request, metadata=bearer(agent.owner.token)):
        pass


def _quota_refusal(error: grpc.aio.AioRpcError) -> tuple[str, str, str, int]:
    """A RESOURCE_EXHAUSTED status's reason, QuotaFailure subject and limit, and RetryInfo delay."""
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
    status = rpc_status.from_call(error)
    assert status is not None
    found: dict[str, Any] = {}
    for detail in status.details:
        for kind in (
            error_details_pb2.ErrorInfo,
            error_details_pb2.RetryInfo,
            error_details_pb2.QuotaFailure,
        ):
            if detail.Is(kind.DESCRIPTOR):
                found[kind.__name__] = kind()
                detail.Unpack(found[kind.__name__])
    info, retry, quota = found["ErrorInfo"], found["RetryInfo"], found["QuotaFailure"]
    (violation,) = quota.violations
    limit = info.metadata["quota_limit"]
    field = f"project.limits.{limit}" if violation.subject.startswith("project:") else limit
    assert violation.description == f"limit {field} reached"
    return info.reason, violation.subject, limit, retry.retry_delay.seconds


async def test_requests_past_a_projects_minute_are_refused_on_every_face(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await _limited_agent(api, requests_per_minute=3)  # its creation was the first
    admin = await api.admin()
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = gw_grpc.GatewayServiceStub(channel)
        await _stream_chat(stub, agent)
        await _stream_chat(stub, agent)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _stream_chat(stub, agent)
    reason, subject, limit, retry_seconds = _quota_refusal(refused.value)
    assert (reason, subject, limit) == (
        "QUOTA_EXCEEDED",
        f"project:{agent.project_id}",
        "requests_per_minute",
    )
    # Three a minute: the next one fits in about 20 s.
    assert 1 <= retry_seconds <= 20

    rest = await api.http.get(_agents(agent), headers=agent.owner.headers)
    assert rest.status_code == 429, rest.text
    assert 1 <= int(rest.headers["Retry-After"]) <= 20
    assert "requests_per_minute" in rest.json()["detail"]
    with pytest.raises(openai.RateLimitError) as limited:
        await _openai(mesh, agent).chat.completions.create(
            model=agent.model, messages=[{"role": "user", "content": "hi"}]
        )
    assert limited.value.code == "rate_limit_exceeded"
    assert int(limited.value.response.headers["Retry-After"]) >= 1

    # A superuser is held to no project's limits (it must reach the project to raise them), and
    # a limit lifted holds within the gateway's few seconds of reusing a project's limits.
    lifted = await api.http.patch(
        f"/api/v1/projects/{agent.project_id}",
        json={"limits": {"requests_per_minute": 0}},
        headers=admin.headers,
    )
    assert lifted.status_code == 200, lifted.text

    async def answered() -> bool:
        listed = await api.http.get(
            f"/api/v1/projects/{agent.project_id}/agents", headers=agent.owner.headers
        )
        return listed.status_code == 200

    # The gateway reuses a project's limits for 2 s; the rest is a loaded machine's margin.
    assert await eventually(answered, what="the lifted limit to hold") < 8


async def test_unset_or_zero_requests_per_minute_is_unlimited(api: Api, once: None) -> None:
    unset, zero = await _limited_agent(api), await _limited_agent(api, requests_per_minute=0)

    async def listed(agent: Agent) -> int:
        response = await api.http.get(
            f"/api/v1/projects/{agent.project_id}/agents", headers=agent.owner.headers
        )
        return response.status_code

    statuses = await asyncio.gather(*(listed(agent) for agent in (unset, zero) for _ in range(30)))
    assert set(statuses) == {200}


@contextlib.asynccontextmanager
async def _watching(address: str, agent: Agent, session_id: str) -> AsyncIterator[None]:
    """A WatchEvents stream of the session held open (its first event read) for the block."""
    async with grpc.aio.insecure_channel(address) as channel:
        watch = mem_grpc.MemoryServiceStub(channel).WatchEvents(
            mem.WatchEventsRequest(session_id=session_id, project_id=agent.project_id),
            metadata=bearer(agent.owner.token),
        )
        await anext(aiter(watch))
        try:
            yield
        finally:
            watch.cancel()


async def _opens(address: str, agent: Agent) -> bool:
    """Whether a streamed chat is let through (not refused for a limit)."""
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            await _stream_chat(gw_grpc.GatewayServiceStub(channel), agent)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            return False
    return True


async def _chatted_session(mesh: Mesh, agent: Agent) -> str:
    """A session of the agent with one exchange in it (a unary chat: no stream)."""
    session_id = f"watched-{suffix()}"
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        await gw_grpc.GatewayServiceStub(channel).Chat(
            gw.ChatRequest(agent=agent.model, message="hi", session_id=session_id),
            metadata=bearer(agent.owner.token),
        )
    return session_id


async def test_streams_past_a_projects_limit_are_refused_until_one_closes(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await _limited_agent(api, open_streams=1)
    session_id = await _chatted_session(mesh, agent)
    async with _watching(mesh.gateway.address, agent, session_id):
        async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _stream_chat(gw_grpc.GatewayServiceStub(channel), agent)
        reason, subject, limit, retry_seconds = _quota_refusal(refused.value)
        assert (reason, subject, limit) == ("QUOTA_EXCEEDED", f"project:{agent.project_id}", "open_streams")
        assert retry_seconds >= 1
        with pytest.raises(openai.RateLimitError) as limited:
            await _openai(mesh, agent).chat.completions.create(
                model=agent.model, messages=[{"role": "user", "content": "hi"}], stream=True
            )
        assert limited.value.code == "rate_limit_exceeded"
        assert int(limited.value.response.headers["Retry-After"]) >= 1
        with pytest.raises(openai.RateLimitError):
            await _openai(mesh, agent).responses.create(model=agent.model, input="hi", stream=True)
        a2a = await a2a_jsonrpc(http, agent, "SendStreamingMessage")
        assert "QUOTA_EXCEEDED" in a2a.text and "open_streams" in a2a.text, a2a.text
        # What is not a stream is still answered.
        assert await _chatted_session(mesh, agent)
    # The watch's client went away: its slot is free again.
    await eventually(lambda: _opens(mesh.gateway.address, agent), what="the closed stream's slot to free")


async def test_one_users_open_streams_are_capped_by_the_operator(mesh: Mesh, api: Api, once: None) -> None:
    gateway = await start_gateway(mesh, max_open_streams_per_user=1)
    try:
        first = await _limited_agent(api)
        second = await api.agent(first.owner, mock_responses=["ok"] * 20)  # another project
        other = await _limited_agent(api)  # another user
        session_id = await _chatted_session(mesh, first)
        async with _watching(gateway.address, first, session_id):
            async with grpc.aio.insecure_channel(gateway.address) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await _stream_chat(gw_grpc.GatewayServiceStub(channel), second)
            reason, subject, limit, _ = _quota_refusal(refused.value)
            assert reason == "QUOTA_EXCEEDED" and limit == "max_open_streams_per_user"
            assert subject.startswith("user:")
            assert await _opens(gateway.address, other)
        await eventually(lambda: _opens(gateway.address, second), what="the user's slot to free")
    finally:
        await gateway.stop(grace_seconds=1)
