"""Terminating an agent stops its work: the run in flight ends cancelled (recorded as such), over
REST and over the public gRPC API alike, and the terminated agent takes no new chat."""

from __future__ import annotations

import asyncio

import grpc
import httpx

from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.registry.v1 import registry_service_pb2, registry_service_pb2_grpc
from tests.integration.gateway.support import Agent, Api, suffix
from tests.polling import eventually

SLOW = {"content": "slowly " * 180, "delay_seconds": 0.25}


async def _stream_until_working(channel: grpc.aio.Channel, api: Api, agent: Agent, session_id: str):
    stub = gateway_service_pb2_grpc.GatewayServiceStub(channel)
    call = stub.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=agent.model, message="go", session_id=session_id),
        metadata=(("authorization", f"Bearer {agent.owner.token}"),),
    )
    events = []
    async for response in call:
        events.append(response.event)
        if response.event.HasField("text_delta"):
            break
    assert await api.status(agent) == "working"
    return call, events


async def _ends_cancelled(call, events: list) -> None:
    """The rest of the stream: it ends with the run failed as CANCELLED, not answered."""
    try:
        async for response in call:
            events.append(response.event)
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.CANCELLED, error
        return
    last = events[-1]
    assert last.HasField("run_failed"), last
    assert last.run_failed.code == "CANCELLED"


async def _recorded_as_cancelled(api: Api, agent: Agent, session_id: str) -> None:
    async def recorded() -> bool:
        events = await api.session_events(agent, session_id)
        return bool(events) and events[-1]["event_type"] == "error"

    await eventually(recorded, what="the cancelled run is recorded")
    events = await api.session_events(agent, session_id)
    assert events[-1]["metadata"]["cancelled"] is True
    assert "agent_response" not in [e["event_type"] for e in events]


async def test_terminating_over_rest_cancels_the_run_in_flight(
    mesh, http: httpx.AsyncClient, api: Api
) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    session_id = f"terminated-{suffix()}"
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        call, events = await _stream_until_working(channel, api, agent, session_id)
        response = await http.delete(agent.path, headers=agent.owner.headers)
        assert response.status_code == 200, response.text
        await asyncio.wait_for(_ends_cancelled(call, events), timeout=10)
    assert await api.status(agent) == "terminated"
    await _recorded_as_cancelled(api, agent, session_id)

    again = await http.post(
        "/v1/chat/completions",
        json={"model": agent.model, "messages": [{"role": "user", "content": "hello?"}]},
        headers=agent.owner.headers,
    )
    assert again.status_code in (400, 422), again.text  # DESIGN §3: an invalid transition


async def test_terminating_over_public_grpc_cancels_the_run_in_flight(mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    session_id = f"terminated-grpc-{suffix()}"
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        call, events = await _stream_until_working(channel, api, agent, session_id)
        registry = registry_service_pb2_grpc.RegistryServiceStub(channel)
        await registry.DeleteAgent(
            registry_service_pb2.DeleteAgentRequest(project_id=agent.project_id, id=agent.id),
            metadata=(("authorization", f"Bearer {agent.owner.token}"),),
        )
        await asyncio.wait_for(_ends_cancelled(call, events), timeout=10)
    await _recorded_as_cancelled(api, agent, session_id)
