"""Cancellation and deadlines through the whole tree: cancelling the top-level stream stops the
runs below it (on other executors too), nothing starts after the cancel, every cancelled run is
recorded as such, its delegation is answered, and the agents go back to idle; a client deadline
bounds the whole tree."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.runtime.errors import DeadlineExceeded, InvalidArgument, NotFound
from tests.integration.executor.support import Agent, Stack, delegate, event_type, kind
from tests.polling import eventually
from tests.postgres import libpq_dsn

pytestmark = pytest.mark.asyncio(loop_scope="module")

# The worker would stream for about a minute (chunks a second apart), then call a tool: both
# agents idle again well within that says the cancel reached the worker, which did not run its
# script to the end.
SLOW_WORKER = {
    "content": " ".join(f"word{i:03}" for i in range(450)),
    "delay_seconds": 1.0,
    "tool_calls": [{"name": "get_current_time", "arguments": {}}],
}


async def coordinator_and_worker(stack: Stack) -> tuple[Agent, Agent]:
    project = await stack.project()
    worker = await stack.agent(
        project, "worker", tools=["get_current_time"], mock_responses=[SLOW_WORKER, "done"]
    )
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate("worker", "work slowly"), "never reached"],
    )
    return coordinator, worker


async def assert_cancelled_tree(
    stack: Stack,
    session_id: str,
    coordinator: Agent,
    worker: Agent,
    *,
    delegation_outcomes: tuple[str, ...] = ("cancelled",),
) -> None:
    """Waits for both agents to be idle again (far sooner than the worker's script would end);
    checks what they recorded."""

    async def both_idle() -> bool:
        return await stack.status(worker) == "idle" and await stack.status(coordinator) == "idle"

    await eventually(both_idle, timeout=20, what="both agents idle after the cancel")
    stored = await stack.events(session_id)
    settled = len(stored)
    await asyncio.sleep(0.5)  # anything still running below would record more by now
    stored = await stack.events(session_id)
    assert len(stored) == settled, "nothing happens after the cancel"
    # The two agents' cleanups run at once; each agent's own events are in order.
    assert [event_type(e) for e in stored if e.agent == "coordinator"] == [
        "user_message",
        "delegation_request",
        "delegation_response",
        "error",
    ]
    assert [event_type(e) for e in stored if e.agent == "worker"] == ["task_delegation_received", "error"]
    by_type = {(e.agent, event_type(e)): e for e in stored}
    assert by_type[("worker", "error")].metadata["cancelled"] is True
    assert by_type[("coordinator", "error")].metadata["cancelled"] is True
    response = by_type[("coordinator", "delegation_response")]
    assert json.loads(response.content)["outcome"] in delegation_outcomes
    assert response.delegation_id == by_type[("coordinator", "delegation_request")].delegation_id
    for agent in (coordinator, worker):
        assert (await stack.settled(agent)).tasks_completed == 0


async def test_cancelling_the_executor_stream_stops_the_worker_below(stack: Stack) -> None:
    coordinator, worker = await coordinator_and_worker(stack)
    request = stack.run_request(coordinator, "start")
    seen: list[run_pb2.RunEvent] = []
    async for event in stack.executor.run(request, metadata=stack.metadata):
        seen.append(event)
        if event.agent == "worker" and kind(event) == "text_delta":
            break  # leaving the stream cancels the call
    await assert_cancelled_tree(stack, request.session_id, coordinator, worker)
    assert not [e for e in seen if kind(e) in ("tool_call", "run_completed")]


async def test_a_client_cancelling_stream_chat_stops_every_run_below(stack: Stack) -> None:
    coordinator, worker = await coordinator_and_worker(stack)
    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=coordinator.ref, message="start"), metadata=stack.metadata
    )
    session_id = ""
    async for response in call:
        session_id = response.event.session_id
        if response.event.agent == "worker" and kind(response.event) == "text_delta":
            call.cancel()
            break
    await assert_cancelled_tree(stack, session_id, coordinator, worker)


async def test_a_client_deadline_bounds_the_whole_tree(stack: Stack) -> None:
    coordinator, worker = await coordinator_and_worker(stack)
    request = stack.run_request(coordinator, "start")
    with pytest.raises(DeadlineExceeded):
        async for _ in stack.executor.run(request, timeout=1.0, metadata=stack.metadata):
            pass
    # The worker's call carries the same deadline: the coordinator sees its delegation cancelled
    # or timed out, whichever fires first.
    await assert_cancelled_tree(
        stack, request.session_id, coordinator, worker, delegation_outcomes=("cancelled", "timeout")
    )
    stored = await stack.events(request.session_id)
    codes = {e.agent: e.metadata["code"] for e in stored if event_type(e) == "error"}
    assert codes["coordinator"] == "DEADLINE_EXCEEDED"
    # The worker's deadline is the same; whichever fires first, its caller's cancel or its own.
    assert codes["worker"] in ("DEADLINE_EXCEEDED", "CANCELLED")


async def test_terminating_an_agent_cancels_its_runs_and_the_caller_carries_on(stack: Stack) -> None:
    coordinator, worker = await coordinator_and_worker(stack)
    request = stack.run_request(coordinator, "start")
    events: list[run_pb2.RunEvent] = []
    worker_streaming = asyncio.Event()

    async def chat() -> None:
        async for event in stack.executor.run(request, metadata=stack.metadata):
            events.append(event)
            if event.agent == "worker" and kind(event) == "text_delta":
                worker_streaming.set()

    chatting = asyncio.create_task(chat())
    await asyncio.wait_for(worker_streaming.wait(), 10)
    await stack.terminate(worker)
    cancelled = await stack.executor.cancel_runs(
        worker.project.id, worker.id, reason="agent terminated", metadata=stack.metadata
    )
    assert cancelled == 1
    await asyncio.wait_for(chatting, 10)

    worker_end = [e for e in events if e.agent == "worker" and kind(e) in ("run_completed", "run_failed")]
    assert [(kind(e), e.run_failed.code) for e in worker_end] == [("run_failed", "CANCELLED")]
    (response,) = [e.delegation_response for e in events if kind(e) == "delegation_response"]
    assert response.outcome == run_pb2.DELEGATION_OUTCOME_CANCELLED
    assert events[-1].agent == "coordinator" and events[-1].run_completed.content == "never reached"
    stored = await stack.events(request.session_id, agent="worker")
    assert [event_type(e) for e in stored] == ["task_delegation_received", "error"]
    assert stored[-1].metadata["reason"] == "agent terminated"
    assert await stack.status(worker) == "terminated"
    assert await stack.settled_status(coordinator) == "idle"


async def test_a_run_cancelled_again_while_it_records_its_cancellation_still_says_so(stack: Stack) -> None:
    """A run is cancelled again while it records that it was cancelled (as an interrupted run is
    interrupted again by its executor's next lease renewal): that does not cut the recording
    short — its stream still ends with RunFailed CANCELLED, once its end is in the log. On
    PostgreSQL, where the test holds the event table so that the recording waits."""
    if not stack.database_url.startswith("postgresql"):
        pytest.skip("holds a table lock on PostgreSQL")
    project = await stack.project()
    agent = await stack.agent(
        project, "sleeper", mock_responses=[{"content": "word " * 130, "delay_seconds": 3}]
    )
    stream = stack.executor.run(stack.run_request(agent, "start"), metadata=stack.metadata)
    started = await anext(stream)
    assert started.HasField("run_started")
    rest = asyncio.ensure_future(_all(stream))

    holder = await asyncpg.connect(libpq_dsn(stack.database_url))
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE memory_events IN EXCLUSIVE MODE")  # reads go on
            cancel = {"reason": "first", "run_id": started.run_id, "metadata": stack.metadata}
            assert await stack.executor.cancel_runs(project.id, agent.id, **cancel) == 1

            async def recording_waits() -> bool:
                return bool(
                    await holder.fetchval(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted"
                        " AND relation = 'memory_events'::regclass"
                    )
                )

            await eventually(recording_waits, what="the cancellation's append waiting for the lock")
            cancel["reason"] = "second"
            assert await stack.executor.cancel_runs(project.id, agent.id, **cancel) == 1  # stopping
    finally:
        await holder.close()

    events = await asyncio.wait_for(rest, 10)
    assert events[-1].run_failed.code == "CANCELLED", events[-1]
    assert events[-1].run_failed.message == "the run was cancelled: first"
    stored = await stack.events(started.session_id)
    assert [(event_type(e), dict(e.metadata.items()).get("reason")) for e in stored] == [
        ("user_message", None),
        ("error", "first"),
    ]
    assert await stack.settled_status(agent) == "idle"


async def _all(stream: AsyncIterator[run_pb2.RunEvent]) -> list[run_pb2.RunEvent]:
    return [event async for event in stream]


async def test_only_those_who_may_see_an_agent_may_cancel_its_runs(stack: Stack) -> None:
    _, worker = await coordinator_and_worker(stack)
    with pytest.raises(NotFound):
        await stack.executor.cancel_runs(worker.project.id, "no-such-agent", metadata=stack.metadata)
    with pytest.raises(InvalidArgument):
        await stack.executor.cancel_runs("", worker.id, metadata=stack.metadata)
