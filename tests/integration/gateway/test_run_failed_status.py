"""Why a run failed reaches every client as data, not only as text: RunFailed carries a
`google.rpc.Status` (code, ErrorInfo reason, details) that StreamChat passes on as is, Chat turns
into the call's rich status, and the OpenAI-compatible face into the error's `code`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest_asyncio
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.runtime.errors import ERROR_DOMAIN
from tests.integration.gateway.support import Agent, Api

REASON = "SUB_AGENT_FAILED"


@pytest_asyncio.fixture(loop_scope="package")
async def channel(mesh: Mesh) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield channel


async def _failing_pipeline(api: Api) -> Agent:
    """A sequential agent whose only sub-agent is paused: its run starts, then fails."""
    owner = await api.user()
    project = await api.project(owner)
    sleeper = await api.agent(owner, name="sleeper", mock_responses=["zzz"], project=project)
    paused = await api.http.post(f"{sleeper.path}/pause", headers=owner.headers)
    assert paused.status_code == 200, paused.text
    return await api.agent(
        owner, name="pipeline", project=project, type_fields={"kind": "sequential", "sub_agents": ["sleeper"]}
    )


def _error_info(details) -> error_details_pb2.ErrorInfo:
    infos = []
    for detail in details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
    assert len(infos) == 1, details
    return infos[0]


async def test_stream_chat_carries_the_status_of_a_failed_run(api: Api, channel: grpc.aio.Channel) -> None:
    pipeline = await _failing_pipeline(api)
    stub = gw_grpc.GatewayServiceStub(channel)
    call = stub.StreamChat(
        gw.StreamChatRequest(agent=pipeline.model, message="go"),
        metadata=(("authorization", f"Bearer {pipeline.owner.token}"),),
        timeout=60,
    )
    events = [response.event async for response in call]

    last = events[-1]
    assert last.HasField("run_failed") and last.agent == "pipeline", last
    failed = last.run_failed
    assert failed.code == "FAILED_PRECONDITION" and "sleeper" in failed.message, "the old fields stay"
    assert failed.status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert failed.status.message == failed.message
    info = _error_info(failed.status.details)
    assert (info.reason, info.domain) == (REASON, ERROR_DOMAIN)


async def test_chat_fails_with_the_runs_code_and_reason(api: Api, channel: grpc.aio.Channel) -> None:
    pipeline = await _failing_pipeline(api)
    stub = gw_grpc.GatewayServiceStub(channel)
    try:
        await stub.Chat(
            gw.ChatRequest(agent=pipeline.model, message="go"),
            metadata=(("authorization", f"Bearer {pipeline.owner.token}"),),
            timeout=60,
        )
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
        status = rpc_status.from_call(error)
        assert status is not None
        assert _error_info(status.details).reason == REASON
        assert "sleeper" in (error.details() or "")
    else:
        raise AssertionError("the chat should have failed")


async def test_the_openai_face_names_the_reason(api: Api, http: httpx.AsyncClient) -> None:
    pipeline = await _failing_pipeline(api)
    response = await http.post(
        "/v1/chat/completions",
        json={"model": pipeline.model, "messages": [{"role": "user", "content": "go"}]},
        headers=pipeline.owner.headers,
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == REASON.lower()
    assert "sleeper" in error["message"]
