"""Resuming a chat's stream by the last `seq` seen (StreamChat `resume_after_seq`): the rest of
the run arrives from the session's log, every recorded event once, until the run's final event."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.integration.gateway.delegating import delegating_agents
from tests.integration.gateway.support import Api, suffix
from tests.mesh import bearer


@pytest_asyncio.fixture(loop_scope="package")
async def channel(mesh: Mesh) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield channel


async def test_a_second_stream_resumes_after_the_last_seq_and_ends_with_the_run(
    channel: grpc.aio.Channel, api: Api
) -> None:
    _, coordinator = await delegating_agents(
        api, worker_answer={"content": "part " * 40, "delay_seconds": 0.01}
    )
    owner = coordinator.owner
    gateway = gw_grpc.GatewayServiceStub(channel)
    session_id = f"resume-{suffix()}"
    chat = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, message="go", session_id=session_id),
        metadata=bearer(owner.token),
    )
    run_id, last_seq = "", 0
    async for response in chat:
        run_id = run_id or response.event.run_id
        last_seq = max(last_seq, response.event.seq)
        if response.event.HasField("delegation_request"):
            break  # the client stops reading here (the stream stays open: the run goes on)

    resumed = [
        response.event
        async for response in gateway.StreamChat(
            gw.StreamChatRequest(
                agent=coordinator.model,
                session_id=session_id,
                resume_after_seq=last_seq,
                resume_run_id=run_id,
            ),
            metadata=bearer(owner.token),
        )
    ]
    rest_of_live = [response.event async for response in chat]

    seqs = [event.seq for event in resumed]
    assert seqs == sorted(set(seqs)) and seqs[0] == last_seq + 1
    assert resumed[-1].run_id == run_id and resumed[-1].run_completed.content == "done"
    # What the whole tree used, as the live stream's end says it (read back from the log's answer).
    assert rest_of_live[-1].run_completed.usage == resumed[-1].run_completed.usage
    assert resumed[-1].run_completed.usage.input_tokens > 0
    # Every recorded event the live stream went on to carry, the resumed one carried too.
    assert {e.seq for e in rest_of_live if e.seq} <= set(seqs)
    events = await api.session_events(coordinator, session_id)
    assert seqs == [e["seq"] for e in events if e["seq"] > last_seq]
    worker_answer = next(e for e in resumed if e.delegation_path and e.HasField("run_completed"))
    assert list(worker_answer.delegation_path) == ["coordinator"]

    # Resuming after the end: nothing more, the stream just ends.
    again = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, session_id=session_id, resume_after_seq=seqs[-1]),
        metadata=bearer(owner.token),
    )
    assert [response async for response in again] == []


async def test_resuming_needs_a_session_of_the_agents_project(channel: grpc.aio.Channel, api: Api) -> None:
    agent = await api.agent(mock_responses=["hi"])
    other = await api.agent(agent.owner, mock_responses=["hi"])
    gateway = gw_grpc.GatewayServiceStub(channel)
    session_id = f"resume-own-{suffix()}"
    await gateway.Chat(
        gw.ChatRequest(agent=agent.model, message="hello", session_id=session_id),
        metadata=bearer(agent.owner.token),
    )
    for request, code in (
        (
            gw.StreamChatRequest(agent=other.model, session_id=session_id, resume_after_seq=1),
            grpc.StatusCode.NOT_FOUND,
        ),
        (gw.StreamChatRequest(agent=agent.model, resume_after_seq=1), grpc.StatusCode.INVALID_ARGUMENT),
        (
            gw.StreamChatRequest(agent=agent.model, session_id=session_id, resume_after_seq=-1),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            [response async for response in gateway.StreamChat(request, metadata=bearer(agent.owner.token))]
        assert raised.value.code() == code, raised.value.details()
