"""Project limits through the gateway (DESIGN §12): set over REST by a superuser, lowered but not
raised by the owner; runs past the project's runs at once refused on every face — HTTP 429 with
`Retry-After` (OpenAI's `rate_limit_exceeded` on `/v1`, which the `openai` client retries by itself),
gRPC RESOURCE_EXHAUSTED — and nothing of a refused chat stored."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import httpx
import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.gateway.support import Agent, Api, a2a_jsonrpc
from tests.mesh import bearer
from tests.polling import eventually

# The held run's one chunk comes this late: it holds its project's one run slot until cancelled.
_HOLD_SECONDS = 120


async def test_limits_are_set_by_superusers_and_only_lowered_by_owners(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    owner, admin = await api.user(), await api.admin()
    project = await api.project(owner)
    path = f"/api/v1/projects/{project['id']}"
    # Every limit the API has, unset: the operator's defaults apply.
    assert project["limits"] == dict.fromkeys(field.name for field in res.ProjectLimits.DESCRIPTOR.fields)
    assert {"stored_bytes", "cost_per_month"} <= project["limits"].keys()
    set_ = await http.patch(path, json={"limits": {"concurrent_runs": 3}}, headers=admin.headers)
    assert set_.status_code == 200, set_.text
    assert set_.json()["limits"]["concurrent_runs"] == 3
    assert (await http.get(path, headers=owner.headers)).json()["limits"]["concurrent_runs"] == 3

    raised = await http.patch(path, json={"limits": {"concurrent_runs": 4}}, headers=owner.headers)
    assert raised.status_code == 403
    assert "project.limits.concurrent_runs" in raised.json()["detail"]
    lowered = await http.patch(path, json={"limits": {"concurrent_runs": 1}}, headers=owner.headers)
    assert lowered.status_code == 200 and lowered.json()["limits"]["concurrent_runs"] == 1
    negative = await http.patch(path, json={"limits": {"open_streams": -1}}, headers=admin.headers)
    assert negative.status_code == 422


async def _one_run_at_a_time(http: httpx.AsyncClient, api: Api) -> tuple[Agent, Agent]:
    """Two agents of one project limited to one run at once: one slow, one quick."""
    owner, admin = await api.user(), await api.admin()
    project = await api.project(owner)
    limited = await http.patch(
        f"/api/v1/projects/{project['id']}", json={"limits": {"concurrent_runs": 1}}, headers=admin.headers
    )
    assert limited.status_code == 200, limited.text
    slow = await api.agent(
        owner,
        name="slow",
        project=project,
        mock_responses=[{"content": "late", "delay_seconds": _HOLD_SECONDS}],
    )
    quick = await api.agent(owner, name="quick", project=project, mock_responses=["quick answer"])
    return slow, quick


@contextlib.asynccontextmanager
async def _holding(http: httpx.AsyncClient, api: Api, agent: Agent):  # type: ignore[no-untyped-def]
    """A chat with the slow agent in flight (its project's one slot taken) until the block ends."""
    body = {"messages": [{"role": "user", "content": "take your time"}], "stream": True}
    url = f"{agent.base}/v1/chat/completions"

    async def chat() -> None:
        async with http.stream("POST", url, json=body, headers=agent.owner.headers) as response:
            async for _ in response.aiter_bytes():
                pass

    task = asyncio.create_task(chat())
    try:
        await eventually(lambda: _status_is(api, agent, "working"), what="the slow run to start")
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task
        await eventually(lambda: _status_is(api, agent, "idle"), timeout=30, what="the slow run to end")


async def _status_is(api: Api, agent: Agent, status: str) -> bool:
    return await api.status(agent) == status


async def test_runs_past_the_limit_are_refused_on_every_face(
    http: httpx.AsyncClient, mesh: Mesh, api: Api
) -> None:
    slow, quick = await _one_run_at_a_time(http, api)
    client = AsyncOpenAI(
        base_url=f"{mesh.gateway.http.url}{quick.base}/v1", api_key=quick.owner.token, max_retries=0
    )
    # Known to the executor (its input is then recorded while its start is asked for).
    first = await client.chat.completions.create(
        model=quick.model, messages=[{"role": "user", "content": "hi"}]
    )
    assert first.choices[0].message.content == "quick answer"
    async with _holding(http, api, slow):
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(
                model=quick.model,
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Session-Id": "refused"},
            )
        assert raised.value.code == "rate_limit_exceeded"
        assert raised.value.body["type"] == "rate_limit_exceeded"  # type: ignore[index]
        assert int(raised.value.response.headers["Retry-After"]) >= 1
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(
                model=quick.model,
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={"X-Session-Id": "refused-again"},
            )

        a2a = await a2a_jsonrpc(http, quick, "SendMessage")
        (info,) = [d for d in a2a.json()["error"]["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
        assert (info["metadata"]["reason"], info["metadata"]["quota_limit"]) == (
            "QUOTA_EXCEEDED",
            "concurrent_runs",
        )
        assert int(info["metadata"]["retry_after_seconds"]) >= 1

        async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await gw_grpc.GatewayServiceStub(channel).Chat(
                    gw.ChatRequest(agent=quick.model, message="hi"), metadata=bearer(quick.owner.token)
                )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    # A run's input is recorded only once its run started: nothing of a refused chat is stored.
    for session in ("refused", "refused-again"):
        stored = await http.get(
            f"/api/v1/projects/{quick.project_id}/sessions/{session}/events", headers=quick.owner.headers
        )
        assert stored.status_code == 404, stored.text
    # With the slot free again, the same client is answered.
    completion = await client.chat.completions.create(
        model=quick.model, messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "quick answer"


async def test_the_openai_client_retries_a_refused_chat_by_itself(
    http: httpx.AsyncClient, mesh: Mesh, api: Api, once: None
) -> None:
    slow, quick = await _one_run_at_a_time(http, api)
    refusals: list[int] = []

    async def count(response: httpx.Response) -> None:
        if response.status_code == 429:
            refusals.append(429)

    # Retry-After is 1 s: the client retries for much longer than the slot is held.
    client = AsyncOpenAI(
        base_url=f"{mesh.gateway.http.url}{quick.base}/v1",
        api_key=quick.owner.token,
        max_retries=30,
        http_client=httpx.AsyncClient(event_hooks={"response": [count]}),
    )
    async with _holding(http, api, slow):
        answer = asyncio.create_task(
            client.chat.completions.create(model=quick.model, messages=[{"role": "user", "content": "hi"}])
        )
        await eventually(lambda: _refused(refusals), what="the chat to be refused while the slot is held")
    completion = await answer
    assert completion.choices[0].message.content == "quick answer"


async def _refused(refusals: list[int]) -> bool:
    return bool(refusals)
