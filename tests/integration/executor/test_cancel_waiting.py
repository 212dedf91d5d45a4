"""Cancelling a run that waits for a person, through the whole mesh (registry, executor, memory,
gateway; SQLite and PostgreSQL): the public CancelWaitingRun (through the gateway's RegistryService)
cancels the session's waiting run and the waiting runs below it — each gets one end, recorded as
a cancelled run's is, its requests are closed (a later answer is refused, saying the run was
cancelled), its agent goes back to idle and the session takes its next message. Terminating an
agent cancels its waiting runs; a caller waiting on one is told its delegation was cancelled and
goes on.

The executor here renews its leases once an hour: only the registry's push on the agent watch
hands the cancelled runs (and the callers waiting on them) to it."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.memory.v1.resources_pb2 import Event
from agentmesh.registry.v1 import registry_service_pb2 as reg
from tests.integration.executor import test_human_input as human_input
from tests.integration.executor.support import Agent, Stack, event_type, kind
from tests.integration.executor.test_human_input import ask, asking_agent, delegation_chain, respond
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

# The executor renews its leases once an hour, under leases of three, as in test_human_input.
executor_settings = human_input.executor_settings
registry_settings = human_input.registry_settings


async def cancel(
    stack: Stack, agent: Agent, request_id: str, reason: str = ""
) -> reg.CancelWaitingRunResponse:
    return await stack.client.registry.CancelWaitingRun(
        reg.CancelWaitingRunRequest(project_id=agent.project.id, input_request_id=request_id, reason=reason),
        metadata=stack.metadata,
    )


async def ends_of(stack: Stack, session: str, count: int) -> list[Event]:
    """The session's run ends, once there are `count` of them."""

    async def ends() -> list[Event]:
        return [e for e in await stack.events(session) if e.idempotency_key.endswith(":end")]

    async def ended() -> bool:
        return len(await ends()) >= count

    await eventually(ended, what=f"{count} run ends recorded")
    return await ends()


def cancelled_end(event: Event) -> bool:
    meta = event.metadata.fields
    return (
        event_type(event) == "error"
        and meta["cancelled"].bool_value
        and meta["code"].string_value == "CANCELLED"
        and "cancelled" in event.content
    )


async def idle(stack: Stack, *agents: Agent) -> None:
    for agent in agents:

        async def is_idle(agent: Agent = agent) -> bool:
            return await stack.status(agent) == "idle"

        await eventually(is_idle, what=f"{agent.name} idle")


async def test_cancelling_a_waiting_run_ends_it_cancelled_and_frees_its_session(stack: Stack) -> None:
    agent = await asking_agent(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "Book me a trip.", session_id=session)
    run_id = events[0].run_id
    request_id = events[-1].run_suspended.request_ids[0]

    cancelled = await cancel(stack, agent, request_id, reason="plans changed")
    assert list(cancelled.run_ids) == [run_id]
    assert cancelled.input_request.state == run_pb2.INPUT_REQUEST_STATE_CANCELLED
    assert cancelled.input_request.response.reason == "plans changed"
    assert cancelled.input_request.response.responder  # the canceller, as for a response

    # One end, recorded as a cancelled run's; the agent idle again.
    (end,) = await ends_of(stack, session, 1)
    assert end.run_id == run_id and cancelled_end(end), end
    assert "plans changed" in end.content
    await idle(stack, agent)
    assert (await stack.stats()).active_runs == 0

    # A later answer is refused, saying the run was cancelled; the request reads cancelled.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Lisbon"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "cancelled" in (refused.value.details() or "")
    read = await stack.client.registry.GetInputRequest(
        reg.GetInputRequestRequest(project_id=agent.project.id, id=request_id), metadata=stack.metadata
    )
    assert read.input_request.state == run_pb2.INPUT_REQUEST_STATE_CANCELLED
    listed = await stack.client.registry.ListInputRequests(
        reg.ListInputRequestsRequest(
            project_id=agent.project.id, session_id=session, state=run_pb2.INPUT_REQUEST_STATE_CANCELLED
        ),
        metadata=stack.metadata,
    )
    assert [r.id for r in listed.input_requests] == [request_id]

    # Cancelling again is refused as the answer was; the session takes its next message.
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await cancel(stack, agent, request_id)
    assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    after = await stack.chat(agent, "Anything new?", session_id=session)
    assert kind(after[0]) == "run_started" and after[0].run_id != run_id
    assert kind(after[-1]) == "run_suspended"  # the script starts over: it asks again


async def test_cancel_requests_are_checked(stack: Stack) -> None:
    agent = await asking_agent(stack)
    events = await stack.chat(agent, "Book me a trip.")
    request_id = events[-1].run_suspended.request_ids[0]
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await cancel(stack, agent, str(uuid.uuid4()))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as too_long:
        await cancel(stack, agent, request_id, reason="x" * 2001)
    assert too_long.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "reason" in (too_long.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as unnamed:
        await cancel(stack, agent, "")
    assert unnamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "input_request_id" in (unnamed.value.details() or "")
    # Nothing was taken: the request still waits, and its answer still resumes the run.
    assert (await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Bern")))[-1].HasField(
        "run_completed"
    )


async def test_a_two_level_delegation_waiting_at_the_worker_is_cancelled_from_the_top(stack: Stack) -> None:
    worker, middle, boss = await delegation_chain(
        stack, [ask(), "x"], ("middle", "unused"), ("boss", "unused")
    )
    session = uuid.uuid4().hex
    events = await stack.chat(boss, "Go.", session_id=session)
    top = events[0].run_id
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.agent == worker.name

    # The worker's request names the session's waiting run: the top one, and every run below.
    cancelled = await cancel(stack, worker, asked.id)
    assert cancelled.run_ids[0] == top and len(set(cancelled.run_ids)) == 3

    # Each run ends once, cancelled, the worker first; each open delegation answered cancelled.
    ends = await ends_of(stack, session, 3)
    assert len({e.run_id for e in ends}) == 3 and all(cancelled_end(e) for e in ends), ends
    assert ends[0].run_id == asked.run_id and ends[-1].run_id == top
    logged = await stack.events(session)
    responses = [e for e in logged if event_type(e) == "delegation_response"]
    assert len(responses) == 2
    assert all(json.loads(e.content)["outcome"] == "cancelled" for e in responses)
    await idle(stack, boss, middle, worker)

    # The session takes its next message.
    after = await stack.chat(boss, "Again.", session_id=session)
    assert kind(after[0]) == "run_started" and after[0].run_id != top


async def test_terminating_an_agent_cancels_its_waiting_runs(stack: Stack) -> None:
    agent = await asking_agent(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "Book me a trip.", session_id=session)
    request_id = events[-1].run_suspended.request_ids[0]

    await stack.terminate(agent)

    (end,) = await ends_of(stack, session, 1)
    assert cancelled_end(end) and "terminated" in end.content, end
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Lisbon"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "cancelled" in (refused.value.details() or "")


async def test_a_caller_waiting_on_a_terminated_agents_run_is_told_and_goes_on(stack: Stack) -> None:
    worker, boss = await delegation_chain(
        stack, [ask(), "x"], ("boss", "The worker was cancelled; done without it.")
    )
    session = uuid.uuid4().hex
    events = await stack.chat(boss, "Go.", session_id=session)
    top = events[0].run_id

    await stack.terminate(worker)

    # The worker ends cancelled; its caller's delegation says so, and the caller goes on to its
    # own end (its script's answer), not cancelled.
    ends = await ends_of(stack, session, 2)
    by_run = {e.run_id: e for e in ends}
    assert cancelled_end(next(e for run, e in by_run.items() if run != top))
    assert event_type(by_run[top]) == "agent_response"
    assert by_run[top].content == "The worker was cancelled; done without it."
    (response,) = [e for e in await stack.events(session) if event_type(e) == "delegation_response"]
    assert json.loads(response.content)["outcome"] == "cancelled"
    await idle(stack, boss)
