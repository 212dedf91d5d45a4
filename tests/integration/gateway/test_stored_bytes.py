"""A project's `stored_bytes` limit (docs/tenants.md#stored-bytes): memory counts what the project's
events weigh and refuses its appends once it is at its limit, so a chat is refused — the official
`openai` client sees RateLimitError, gRPC RESOURCE_EXHAUSTED with QuotaFailure, A2A its error —
while another project, or one whose limit is 0, goes on; retention removing events makes room
again. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import grpc
import httpx
import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.memory.retention import RetentionSweeper
from agentmesh.memory.store import SqlEventStore
from agentmesh.memory.v1 import memory_service_pb2 as memory_pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as memory_grpc
from agentmesh.memory.v1 import resources_pb2 as memory_res
from agentmesh.runtime.database import create_engine
from tests.bearer import service_channel
from tests.integration.gateway.support import Agent, Api, User, a2a_jsonrpc
from tests.integration.gateway.test_edge_limits import _quota_refusal
from tests.integration.memory.builders import EventType, delegation_response, new_event
from tests.mesh import bearer
from tests.polling import eventually

# Room for a chat or two: an input and its answer weigh a few hundred bytes (the answer's
# metadata: its usage).
_LIMIT = 600
_CHATS = 20


async def _project(
    http: httpx.AsyncClient, api: Api, stored_bytes: int | None
) -> tuple[User, dict[str, Any]]:
    """A new project of a new owner, its stored_bytes set by a superuser (None: left unset)."""
    owner, admin = await api.user(), await api.admin()
    project = await api.project(owner)
    if stored_bytes is not None:
        limits = {"limits": {"stored_bytes": stored_bytes}}
        limited = await http.patch(f"/api/v1/projects/{project['id']}", json=limits, headers=admin.headers)
        assert limited.status_code == 200, limited.text
        assert limited.json()["limits"]["stored_bytes"] == stored_bytes
    return owner, project


async def _limited(http: httpx.AsyncClient, api: Api, stored_bytes: int | None) -> Agent:
    owner, project = await _project(http, api, stored_bytes)
    return await api.agent(owner, project=project, mock_responses=["an answer"] * (_CHATS + 5))


async def _idle(api: Api, agent: Agent) -> bool:
    return await api.status(agent) == "idle"


def _client(mesh: Mesh, agent: Agent) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{mesh.gateway.http.url}{agent.base}/v1", api_key=agent.owner.token, max_retries=0
    )


async def _chat(client: AsyncOpenAI, agent: Agent, session: str) -> str | None:
    completion = await client.chat.completions.create(
        model=agent.model,
        messages=[{"role": "user", "content": "a question of some length " * 4}],
        extra_headers={"X-Session-Id": session},
    )
    return completion.choices[0].message.content


async def _chat_until_refused(client: AsyncOpenAI, agent: Agent) -> tuple[int, openai.RateLimitError]:
    """Chats (a session each) until one is refused: how many were answered, and the refusal."""
    for answered in range(_CHATS):
        try:
            assert await _chat(client, agent, f"s{answered}") == "an answer"
        except openai.RateLimitError as refused:
            return answered, refused
    raise AssertionError(f"{_CHATS} chats of {_LIMIT} stored bytes at most were all answered")


async def test_a_full_project_is_refused_and_others_go_on(
    http: httpx.AsyncClient, mesh: Mesh, api: Api
) -> None:
    full, other, unlimited = (
        await _limited(http, api, _LIMIT),
        await _limited(http, api, None),
        await _limited(http, api, 0),
    )
    client = _client(mesh, full)
    answered, refused = await _chat_until_refused(client, full)
    assert answered >= 1
    assert refused.code == "rate_limit_exceeded"
    assert refused.body["type"] == "rate_limit_exceeded"  # type: ignore[index]
    assert "stored_bytes" in refused.message
    assert int(refused.response.headers["Retry-After"]) >= 1
    # Refused again, on every face, a streamed chat before its stream begins.
    with pytest.raises(openai.RateLimitError):
        await _chat(client, full, "again")
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(
            model=full.model, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as rpc:
            await gw_grpc.GatewayServiceStub(channel).Chat(
                gw.ChatRequest(agent=full.model, message="hi"), metadata=bearer(full.owner.token)
            )
    reason, subject, limit, _ = _quota_refusal(rpc.value)
    assert (reason, subject, limit) == ("QUOTA_EXCEEDED", f"project:{full.project_id}", "stored_bytes")
    a2a = await a2a_jsonrpc(http, full, "SendMessage")
    (info,) = [d for d in a2a.json()["error"]["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert (info["metadata"]["reason"], info["metadata"]["quota_limit"]) == ("QUOTA_EXCEEDED", "stored_bytes")

    # A refused chat's run ended (the agent is idle again) and left nothing in its session.
    await eventually(lambda: _idle(api, full), what="the refused runs to be finished at the registry")
    stored = await http.get(
        f"/api/v1/projects/{full.project_id}/sessions/again/events", headers=full.owner.headers
    )
    assert stored.status_code == 404, stored.text

    # Another project, limited by nothing (unset: the operator's default, 0; or 0 itself).
    for agent in (other, unlimited):
        agent_client = _client(mesh, agent)
        for n in range(answered + 3):
            assert await _chat(agent_client, agent, f"s{n}") == "an answer"


async def test_retention_makes_room_again(
    http: httpx.AsyncClient, mesh: Mesh, api: Api, backend_url: str
) -> None:
    full = await _limited(http, api, _LIMIT)
    client = _client(mesh, full)
    await _chat_until_refused(client, full)
    # The project keeps events a second old at most; a sweep (as the memory service's own, which
    # runs once a minute) removes the rest, and what they weighed no longer counts.
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        policy = memory_res.RetentionPolicy(project_id=full.project_id, max_age_seconds=1)
        await memory_grpc.MemoryServiceStub(channel).SetRetentionPolicy(
            memory_pb.SetRetentionPolicyRequest(policy=policy), metadata=bearer(full.owner.token)
        )
    engine = create_engine(backend_url)
    store = SqlEventStore(engine, group_commit=False)
    sweeper = RetentionSweeper(store, interval_seconds=60)

    async def answered_after_a_sweep() -> bool:
        await sweeper.sweep()
        try:
            return await _chat(client, full, "after") == "an answer"
        except openai.RateLimitError:
            return False

    try:
        await eventually(answered_after_a_sweep, timeout=30, what="a chat once retention removed events")
    finally:
        await store.close()
        await engine.dispose()


_CLOCK = {"content": "", "tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}


async def test_a_run_that_fills_its_project_ends_cleanly(
    http: httpx.AsyncClient, mesh: Mesh, api: Api
) -> None:
    # One byte: the run's input is stored (nothing was), its first step no more.
    owner, project = await _project(http, api, 1)
    agent = await api.agent(
        owner,
        project=project,
        mock_responses=[_CLOCK, "It is now."],
        type_fields={"tools": ["get_current_time"]},
    )
    with pytest.raises(openai.RateLimitError) as refused:
        await _chat(_client(mesh, agent), agent, "filled")
    assert "stored_bytes" in refused.value.message
    await eventually(lambda: _idle(api, agent), what="the run to be finished at the registry")
    # Its session ends on the run's end, which says why: a session never ends on an unanswered input.
    events = await api.session_events(agent, "filled")
    assert [event["event_type"] for event in events] == ["user_message", "error"]
    assert events[-1]["metadata"]["reason"] == "QUOTA_EXCEEDED"


async def test_a_full_project_may_still_end_its_runs(http: httpx.AsyncClient, mesh: Mesh, api: Api) -> None:
    """Straight to memory, as an executor appends: once full, a step is refused, while a run's
    final event (under its end key) and a delegation's response are stored."""
    owner, project = await _project(http, api, 10)
    async with service_channel(mesh.services["memory"].address) as channel:
        memory = memory_grpc.MemoryServiceStub(channel)

        async def append(*events: memory_pb.NewEvent) -> None:
            request = memory_pb.AppendEventsRequest(session_id="s", project_id=project["id"], events=events)
            await memory.AppendEvents(request, metadata=bearer(owner.token))

        await append(new_event("a first message, over ten bytes", run_id="r1"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await append(new_event("a step", run_id="r1"))
        reason, subject, limit, retry_after = _quota_refusal(refused.value)
        assert (reason, subject, limit) == ("QUOTA_EXCEEDED", f"project:{project['id']}", "stored_bytes")
        assert retry_after >= 1
        assert "project.limits.stored_bytes of 10" in (refused.value.details() or "")
        # A batch is refused whole when one of its events is not an end.
        end = new_event("the answer", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE, run_id="r1")
        end.idempotency_key = "r1:end"
        with pytest.raises(grpc.aio.AioRpcError):
            await append(new_event("a step", run_id="r1"), end)
        await append(delegation_response("r1", "d1"))
        await append(end)
        # An end's key on another run's event is no end.
        forged = new_event("more", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE, run_id="r2")
        forged.idempotency_key = "r1:end"
        with pytest.raises(grpc.aio.AioRpcError):
            await append(forged)
