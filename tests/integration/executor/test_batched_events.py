"""Several events per stream message: a caller that asks for batches — executors
relaying a delegation, the gateway, a StreamChat client that opts in — gets every event, in
order, each as it would have come alone, except that consecutive text deltas of one run that
queued together arrive merged (every character, in order); a caller that does not gets one event
per message, as the contract always said."""

from __future__ import annotations

import uuid

import grpc
import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.internal.executor.v1 import executor_service_pb2
from tests.integration.executor.support import Agent, Stack, delegate, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

LONG_ANSWER = "The worker's answer streams in chunks, " * 8


def shape(events: list[run_pb2.RunEvent]) -> list[tuple[str, tuple[str, ...], str]]:
    """What must not change with batching: each event's kind, delegation path and agent — a run
    of consecutive text deltas of one run counted as one (how many it comes in depends on how
    busy each hop was: they merge)."""
    shaped: list[tuple[str, tuple[str, ...], str]] = []
    for e in events:
        step = (kind(e), tuple(e.delegation_path), e.agent)
        if not (shaped and step == shaped[-1] and step[0] == "text_delta"):
            shaped.append(step)
    return shaped


def text_of(events: list[run_pb2.RunEvent], path: tuple[str, ...]) -> str:
    return "".join(
        e.text_delta.text for e in events if kind(e) == "text_delta" and tuple(e.delegation_path) == path
    )


async def delegating_pair(stack: Stack) -> Agent:
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=[LONG_ANSWER])
    return await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate("worker", "answer at length"), "Done."],
    )


async def run_messages(
    stack: Stack, coordinator: Agent, *, batch: bool
) -> list[executor_service_pb2.RunResponse]:
    request = stack.run_request(coordinator, "go", uuid.uuid4().hex)
    request.batch_events = batch
    call = stack.executor.stub.Run(request, metadata=stack.metadata)
    return [response async for response in call]


async def test_a_run_asked_for_batches_streams_every_event_in_order(stack: Stack) -> None:
    coordinator = await delegating_pair(stack)

    single = await run_messages(stack, coordinator, batch=False)
    batched = await run_messages(stack, coordinator, batch=True)

    assert all(m.HasField("event") and not m.events for m in single)
    assert all(m.events and not m.HasField("event") for m in batched)
    one_by_one = [m.event for m in single]
    unpacked = [e for m in batched for e in m.events]
    assert shape(unpacked) == shape(one_by_one)
    assert text_of(unpacked, ("coordinator",)) == text_of(one_by_one, ("coordinator",)) == LONG_ANSWER
    # Within a message, deltas of one run that queued together were merged into one.
    for message in batched:
        for before, after in zip(message.events, message.events[1:], strict=False):
            assert not (kind(before) == kind(after) == "text_delta" and before.run_id == after.run_id), (
                "consecutive deltas of one run in one message should have merged"
            )
    # Each run's recorded events keep their seq, in increasing order.
    for run_id in {e.run_id for e in unpacked}:
        seqs = [e.seq for e in unpacked if e.run_id == run_id and e.seq]
        assert seqs and seqs == sorted(seqs)
    assert unpacked[-1].HasField("run_completed") and unpacked[-1].run_id == unpacked[0].run_id


async def test_stream_chat_batches_only_for_a_client_that_opts_in(stack: Stack) -> None:
    coordinator = await delegating_pair(stack)

    async def messages(batch: bool) -> list[gateway_service_pb2.StreamChatResponse]:
        request = gateway_service_pb2.StreamChatRequest(
            agent=coordinator.ref, message="go", batch_events=batch
        )
        return [r async for r in stack.client.gateway.StreamChat(request, metadata=stack.metadata)]

    default = await messages(False)
    opted_in = await messages(True)

    assert all(m.HasField("event") and not m.events for m in default)
    assert all(m.events and not m.HasField("event") for m in opted_in)
    unpacked = [e for m in opted_in for e in m.events]
    assert shape(unpacked) == shape([m.event for m in default])
    assert unpacked[-1].run_completed.content == "Done."


async def test_a_refused_run_still_ends_with_its_status_when_batched(stack: Stack) -> None:
    project = await stack.project()
    request = executor_service_pb2.RunRequest(
        project_slug=project.slug,
        agent_name="nobody",
        session_id=uuid.uuid4().hex,
        input="hi",
        batch_events=True,
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        [r async for r in stack.executor.stub.Run(request, metadata=stack.metadata)]
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
