"""Delegation through the whole mesh: an LLM agent hands a task to another agent over gRPC (the
`delegate` tool and the fenced ```delegate block), the worker's events stream up through the
coordinator's stream, both agents' events land in memory linked by delegation id, and every way a
delegation can go wrong ends in a typed answer the coordinator's loop carries on from."""

from __future__ import annotations

import json

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.support import Stack, delegate, event_type, final, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

COMPLETED = run_pb2.DELEGATION_OUTCOME_COMPLETED
REFUSED = run_pb2.DELEGATION_OUTCOME_REFUSED


async def test_a_coordinator_delegates_to_a_worker(stack: Stack, spans) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=["Task 42 is processed."])
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate("worker", "Process task 42"), "The worker processed task 42."],
    )

    events = await stack.chat(coordinator, "Please get task 42 done")

    own = [e for e in events if not e.delegation_path]
    below = [e for e in events if e.delegation_path]
    assert [kind(e) for e in own] == [
        "run_started",
        "step_started",
        "delegation_request",
        "delegation_response",
        "step_started",
        "text_delta",
        "run_completed",
    ]
    assert {tuple(e.delegation_path) for e in below} == {("coordinator",)}
    assert {e.agent for e in below} == {"worker"}
    assert next(kind(e) for e in below) == "run_started" and kind(below[-1]) == "run_completed"
    assert "".join(e.text_delta.text for e in below if kind(e) == "text_delta") == "Task 42 is processed."
    request = next(e.delegation_request for e in own if kind(e) == "delegation_request")
    response = next(e.delegation_response for e in own if kind(e) == "delegation_response")
    assert (request.target_agent, request.task) == ("worker", "Process task 42")
    assert (response.delegation_id, response.outcome, response.content) == (
        request.delegation_id,
        COMPLETED,
        "Task 42 is processed.",
    )
    assert final(events).run_completed.content == "The worker processed task 42."
    # The worker's run is a run of its own, on an executor reached over gRPC.
    assert below[0].run_id != own[0].run_id and below[0].run_started.executor_id

    session = events[-1].session_id
    stored = await stack.events(session)
    assert [(e.agent, event_type(e)) for e in stored] == [
        ("coordinator", "user_message"),
        ("coordinator", "delegation_request"),
        ("worker", "task_delegation_received"),
        ("worker", "agent_response"),
        ("coordinator", "delegation_response"),
        ("coordinator", "agent_response"),
    ]
    user, sent, received, answered, returned, answer = stored
    assert json.loads(sent.content) == {"agent": "worker", "task": "Process task 42"}
    assert received.content == "Process task 42"
    assert json.loads(returned.content)["outcome"] == "completed"
    assert {sent.delegation_id, received.delegation_id, answered.delegation_id, returned.delegation_id} == {
        request.delegation_id
    }
    assert user.delegation_id == answer.delegation_id == ""
    # The links: request ← receipt, request ← response, input ← request.
    assert received.parent_event_id == sent.id
    assert returned.parent_event_id == sent.id
    assert sent.parent_event_id == user.id
    assert {e.run_id for e in stored if e.agent == "coordinator"} == {own[0].run_id}
    assert {e.run_id for e in stored if e.agent == "worker"} == {below[0].run_id}
    # One trace across both runs; every event names its span.
    assert len({e.trace_id for e in stored}) == 1 and len(stored[0].trace_id) == 32
    assert all(len(e.span_id) == 16 for e in stored)

    for agent in (coordinator, worker):
        record = await stack.settled(agent)
        assert record.status == resources_pb2.AGENT_STATUS_IDLE
        assert record.tasks_completed == 1

    # The span tree: the worker's run hangs below the coordinator's delegation span.
    finished = {span.context.span_id: span for span in spans.get_finished_spans()}
    (delegation,) = [s for s in finished.values() if s.name == "delegate worker"]
    (worker_run,) = [s for s in finished.values() if s.name == "run worker"]
    ancestors = []
    span = worker_run
    while span.parent is not None and span.parent.span_id in finished:
        span = finished[span.parent.span_id]
        ancestors.append(span.name)
    assert ancestors[: ancestors.index("delegate worker") + 2] == [
        "agentmesh.internal.executor.v1.ExecutorService/Run",
        "agentmesh.internal.executor.v1.ExecutorService/Run",
        "delegate worker",
        "step 1",
    ]
    assert delegation.attributes["agentmesh.delegation.outcome"] == "completed"
    assert format(worker_run.context.trace_id, "032x") == stored[0].trace_id


async def test_a_fenced_delegate_block_delegates_and_stays_out_of_the_answer(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["done by the worker"])
    block = '```delegate\n{"agent": "worker", "task": "Process task 7"}\n```'
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[f"Asking the worker.\n{block}\n", "All done."],
    )

    events = await stack.chat(coordinator, "go")

    own = [e for e in events if not e.delegation_path]
    first_step_text = []
    for event in own:
        if kind(event) == "delegation_request":
            break
        if kind(event) == "text_delta":
            first_step_text.append(event.text_delta.text)
    assert "".join(first_step_text).strip() == "Asking the worker."
    response = next(e.delegation_response for e in own if kind(e) == "delegation_response")
    assert (response.outcome, response.content) == (COMPLETED, "done by the worker")
    assert final(events).run_completed.content == "All done."
    stored = await stack.events(events[-1].session_id, agent="worker")
    assert next((event_type(e), e.content) for e in stored) == ("task_delegation_received", "Process task 7")


async def test_a_delegation_outside_the_network_access_is_refused_and_the_loop_goes_on(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=["should never run"])
    await stack.agent(project, "other")
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["other"],
        mock_responses=[
            delegate("worker", "sneak this through"),
            "I could not delegate, so here is my own answer.",
        ],
    )

    events = await stack.chat(coordinator, "go")

    errors = [e for e in events if kind(e) == "error"]
    assert [e.error.reason for e in errors] == ["DELEGATION_NOT_ALLOWED"]
    assert "may not delegate to 'worker'" in errors[0].error.message
    assert not [e for e in events if kind(e) in ("delegation_request", "delegation_response")]
    assert not [e for e in events if e.delegation_path]
    assert final(events).run_completed.content == "I could not delegate, so here is my own answer."
    stored = await stack.events(events[-1].session_id)
    assert [(e.agent, event_type(e)) for e in stored] == [
        ("coordinator", "user_message"),
        ("coordinator", "error"),
        ("coordinator", "agent_response"),
    ]
    assert stored[1].metadata["reason"] == "DELEGATION_NOT_ALLOWED"
    assert (await stack.settled(worker)).tasks_completed == 0


async def test_delegation_depth_is_bounded_so_cycles_end(stack: Stack) -> None:
    project = await stack.project()
    reentry = resources_pb2.DelegationLimits(allow_reentry=True)  # else a cycle is refused at once
    ping = await stack.agent(
        project,
        "ping",
        mock_responses=[delegate("pong", "your turn"), "ping done"],
        delegation_limits=reentry,
    )
    await stack.agent(
        project,
        "pong",
        network_access=["ping"],
        mock_responses=[delegate("ping", "yours"), "pong done"],
        delegation_limits=reentry,
    )
    config = resources_pb2.AgentConfig()
    config.network_access.values.append("pong")
    await stack.update_config(ping, "config.network_access", config)

    events = await stack.chat(ping, "start the rally")

    assert final(events).run_completed.content == "ping done"
    stored = await stack.events(events[-1].session_id)
    requests = [e for e in stored if event_type(e) == "delegation_request"]
    responses = [e for e in stored if event_type(e) == "delegation_response"]
    # ping(0) → pong(1) → ping(2) → pong(3) → ping(4) → pong(5) ↛ ping(6)
    assert len(requests) == len(responses) == 5
    assert sorted(e.delegation_id for e in requests) == sorted(e.delegation_id for e in responses)
    assert all(json.loads(e.content)["outcome"] == "completed" for e in responses)
    (error,) = [e for e in stored if event_type(e) == "error"]
    assert (error.agent, error.metadata["reason"]) == ("pong", "DELEGATION_DEPTH_EXCEEDED")
    deepest = [e for e in events if kind(e) == "error"]
    assert len(deepest) == 1 and list(deepest[0].delegation_path) == ["ping", "pong", "ping", "pong", "ping"]


@pytest.mark.parametrize("lifecycle", ["paused", "terminated"])
async def test_a_paused_or_terminated_target_refuses_and_the_loop_goes_on(
    stack: Stack, lifecycle: str
) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=["never"])
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate("worker", "do it"), "The worker is unavailable; answering myself."],
    )
    await (stack.pause(worker) if lifecycle == "paused" else stack.terminate(worker))

    events = await stack.chat(coordinator, "go")

    (response,) = [e.delegation_response for e in events if kind(e) == "delegation_response"]
    assert response.outcome == REFUSED
    assert "worker refused the task" in response.content and lifecycle in response.content.lower()
    assert final(events).run_completed.content == "The worker is unavailable; answering myself."
    stored = await stack.events(events[-1].session_id)
    assert [(e.agent, event_type(e)) for e in stored] == [
        ("coordinator", "user_message"),
        ("coordinator", "delegation_request"),
        ("coordinator", "delegation_response"),
        ("coordinator", "agent_response"),
    ]
    assert json.loads(stored[2].content)["outcome"] == "refused"
