"""One chat through all four services, each a real gRPC server: gateway → executor → registry
and memory, the answer streaming back in chunks."""

from __future__ import annotations

import grpc
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc, resources_pb2
from tests.bearer import service_channel
from tests.mesh import MeshClient, bearer

LONG_ANSWER = "The answer streams back in chunks, " * 8


async def test_stream_chat_answers_in_chunks_and_records_the_session(mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=[LONG_ANSWER])

    responses = await client.stream_chat(seeded, "hello")
    events = [r.event for r in responses]

    kinds = [e.WhichOneof("kind") for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_completed"
    deltas = [e.text_delta.text for e in events if e.HasField("text_delta")]
    # The answer streams as text deltas between run_started and run_completed. How many is not
    # the contract: deltas that queue up while a hop is busy sending merge (TextDelta in
    # run.proto), so under load the whole answer may come as one. Their concatenation is what a
    # client may count on; the merge itself is proven step by step in
    # tests/unit/runtime/test_batching.py.
    assert deltas and all(deltas)
    assert "".join(deltas) == LONG_ANSWER
    assert events[-1].run_completed.content == LONG_ANSWER
    session_id = events[-1].session_id
    assert session_id

    async with service_channel(mesh.services["memory"].address) as channel:
        memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
        listed = await memory.ListEvents(
            memory_service_pb2.ListEventsRequest(session_id=session_id), metadata=bearer(token)
        )
    assert [(e.seq, e.agent, e.event_type) for e in listed.events] == [
        (1, seeded.agent_name, resources_pb2.EVENT_TYPE_USER_MESSAGE),
        (2, seeded.agent_name, resources_pb2.EVENT_TYPE_AGENT_RESPONSE),
    ]
    assert listed.events[0].content == "hello"
    assert listed.events[1].content == LONG_ANSWER
    assert all(e.run_id == events[-1].run_id for e in listed.events)


async def test_unary_chat_continues_a_session(mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=["first", "second"])
    request = gateway_service_pb2.ChatRequest(agent=seeded.ref, message="one")
    first = await client.gateway.Chat(request, metadata=bearer(token))
    assert first.content == "first"
    assert first.session_id

    # The mock's script restarts per run: continuing the session gives its first answer again.
    second = await client.gateway.Chat(
        gateway_service_pb2.ChatRequest(agent=seeded.ref, message="two", session_id=first.session_id),
        metadata=bearer(token),
    )
    assert second.session_id == first.session_id
    assert second.content == "first"


async def test_echo_model_answers_with_the_input(mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token)
    response = await client.gateway.Chat(
        gateway_service_pb2.ChatRequest(agent=seeded.ref, message="echo me"), metadata=bearer(token)
    )
    assert response.content == "echo me"


@pytest.mark.parametrize(
    ("agent", "message", "code", "needle"),
    [
        ("no-slash", "hi", grpc.StatusCode.INVALID_ARGUMENT, "project_slug/agent_name"),
        ("nope/nobody", "hi", grpc.StatusCode.NOT_FOUND, ""),
        ("{project}/{agent}", "", grpc.StatusCode.INVALID_ARGUMENT, "message"),
        ("{project}/{agent}", "x" * 300_000, grpc.StatusCode.RESOURCE_EXHAUSTED, "message"),
    ],
)
async def test_bad_chats_get_clear_errors_and_the_gateway_keeps_serving(
    mesh, client: MeshClient, agent: str, message: str, code: grpc.StatusCode, needle: str
) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=["still here"])
    agent = agent.format(project=seeded.project_slug, agent=seeded.agent_name)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await client.gateway.Chat(
            gateway_service_pb2.ChatRequest(agent=agent, message=message), metadata=bearer(token)
        )
    assert raised.value.code() == code
    assert needle in raised.value.details()
    ok = await client.gateway.Chat(
        gateway_service_pb2.ChatRequest(agent=seeded.ref, message="hi"), metadata=bearer(token)
    )
    assert ok.content == "still here"


async def test_chat_without_a_valid_token_is_unauthenticated(mesh, client: MeshClient) -> None:
    for metadata in [(), bearer("not-a-jwt")]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.gateway.Chat(
                gateway_service_pb2.ChatRequest(agent="p/a", message="hi"), metadata=metadata
            )
        assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
