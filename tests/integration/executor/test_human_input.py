"""A run that asks a person, through the whole mesh: `ask_user` suspends the run durably (its
request recorded, its stream ended with `run_suspended`, no end, no executor slot held, the agent
`waiting`), and the one response — given through the gateway's RespondToInput — resumes it from
the log, streamed to the responder, the answer being the tool's result. A second response is
refused naming the first; unary Chat returns the question; a delegated worker's question, two
delegations down, is the top-level caller's to answer, and every run of the tree goes on once.

The executor here renews its leases once an hour: a response can only resume a run because the
registry tells the executors at once (on their agent watch) that a run may be ready."""

from __future__ import annotations

import json
import uuid
from typing import Any

import grpc
import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from tests.integration.executor.support import Agent, Stack, calls, delegate, event_type, kind
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

HOUR = 3600.0


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"lease_renew_interval_seconds": HOUR}


@pytest.fixture(scope="module")
def registry_settings() -> dict[str, Any]:
    return {"run_lease_seconds": 3 * HOUR}


QUESTION = "Which city should I book?"


def ask(question: str = QUESTION) -> dict:
    return calls("ask_user", question=question)


async def asking_agent(stack: Stack, *answers: dict) -> Agent:
    project = await stack.project()
    return await stack.agent(
        project,
        f"planner-{uuid.uuid4().hex[:6]}",
        tools=["ask_user"],
        mock_responses=[ask(), *answers] if answers else [ask(), "Booked."],
    )


async def respond(
    stack: Stack, agent: Agent, request_id: str, response: run_pb2.InputResponse
) -> list[run_pb2.RunEvent]:
    call = stack.client.gateway.RespondToInput(
        gateway_service_pb2.RespondToInputRequest(
            project_id=agent.project.id, id=request_id, response=response
        ),
        metadata=stack.metadata,
    )
    return [message.event async for message in call]


async def test_ask_user_suspends_the_run_which_holds_nothing_while_it_waits(stack: Stack) -> None:
    agent = await asking_agent(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "Book me a trip.", session_id=session)

    kinds = [kind(event) for event in events]
    assert kinds[-1] == "run_suspended", events[-1]
    assert "run_completed" not in kinds and "run_failed" not in kinds
    (requested,) = [event.input_requested.request for event in events if event.HasField("input_requested")]
    assert requested.kind == run_pb2.INPUT_KIND_QUESTION
    assert requested.question == QUESTION
    assert requested.session_id == session and requested.agent == agent.name
    assert requested.seq > 0 and requested.expires_at.seconds > requested.created_at.seconds
    assert list(events[-1].run_suspended.request_ids) == [requested.id]

    # The log holds the request and no end; the agent waits; no executor slot is held.
    logged = await stack.events(session)
    assert [event_type(e) for e in logged].count("input_requested") == 1
    assert not [e for e in logged if e.idempotency_key.endswith(":end")]
    assert await stack.settled_status(agent) == "waiting"
    assert (await stack.stats()).active_runs == 0

    # The request is the project's to answer, pending.
    listed = await stack.client.registry.ListInputRequests(
        reg.ListInputRequestsRequest(project_id=agent.project.id, session_id=session), metadata=stack.metadata
    )
    assert [r.id for r in listed.input_requests] == [requested.id]
    assert listed.input_requests[0].state == run_pb2.INPUT_REQUEST_STATE_PENDING


async def test_the_answer_resumes_the_run_from_the_log_and_streams_it_to_its_end(stack: Stack) -> None:
    agent = await asking_agent(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "Book me a trip.", session_id=session)
    request_id = events[-1].run_suspended.request_ids[0]

    resumed = await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Lisbon"))

    kinds = [kind(event) for event in resumed]
    assert kinds[-1] == "run_completed", kinds
    assert resumed[-1].run_completed.content == "Booked."
    (result,) = [event.tool_result for event in resumed if event.HasField("tool_result")]
    assert result.name == "ask_user" and result.output == "Lisbon" and not result.is_error
    assert {event.run_id for event in resumed} == {events[0].run_id}

    logged = await stack.events(session)
    (received,) = [e for e in logged if event_type(e) == "input_received"]
    content = json.loads(received.content)
    assert content["request_id"] == request_id and content["answer"] == "Lisbon"
    assert content["responder"]  # who answered, never taken from the request
    ends = [e for e in logged if e.idempotency_key.endswith(":end")]
    assert len(ends) == 1 and event_type(ends[0]) == "agent_response"
    assert await stack.settled_status(agent) == "idle"


async def test_only_the_first_response_counts(stack: Stack) -> None:
    agent = await asking_agent(stack)
    events = await stack.chat(agent, "Book me a trip.")
    request_id = events[-1].run_suspended.request_ids[0]
    await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Lisbon"))

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Porto"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "answered" in (refused.value.details() or "")


async def test_unary_chat_returns_the_question_and_its_request(stack: Stack) -> None:
    agent = await asking_agent(stack)
    response = await stack.client.gateway.Chat(
        gateway_service_pb2.ChatRequest(agent=agent.ref, message="Book me a trip."), metadata=stack.metadata
    )
    (request,) = response.input_requests
    assert request.question == QUESTION
    assert QUESTION in response.content and request.id in response.content
    answered = await respond(stack, agent, request.id, run_pb2.InputResponse(answer="Oslo"))
    assert answered[-1].run_completed.content == "Booked."


async def test_a_run_asking_twice_suspends_twice_and_ends_once(stack: Stack) -> None:
    agent = await asking_agent(stack, ask("And which hotel?"), "Booked twice.")
    session = uuid.uuid4().hex
    first = await stack.chat(agent, "Book me a trip.", session_id=session)
    second = await respond(
        stack, agent, first[-1].run_suspended.request_ids[0], run_pb2.InputResponse(answer="Rome")
    )
    assert kind(second[-1]) == "run_suspended"
    (asked,) = [e.input_requested.request for e in second if e.HasField("input_requested")]
    assert asked.question == "And which hotel?"
    third = await respond(stack, agent, asked.id, run_pb2.InputResponse(answer="The Grand"))
    assert third[-1].run_completed.content == "Booked twice."
    logged = await stack.events(session)
    assert [event_type(e) for e in logged].count("input_received") == 2
    assert len([e for e in logged if e.idempotency_key.endswith(":end")]) == 1


async def delegation_chain(stack: Stack, worker_responses: list, *callers: tuple[str, str]) -> list[Agent]:
    """A worker that may ask (`ask_user`) and the agents above it, each delegating to the one
    below and then answering its text: [worker, ..., top]."""
    project = await stack.project()
    suffix = uuid.uuid4().hex[:6]
    chain = [
        await stack.agent(project, f"worker-{suffix}", tools=["ask_user"], mock_responses=worker_responses)
    ]
    for name, then in callers:
        below = chain[-1].name
        chain.append(
            await stack.agent(
                project,
                f"{name}-{suffix}",
                network_access=[below],
                mock_responses=[delegate(below, f"help {name}"), then],
            )
        )
    return chain


async def test_a_workers_question_two_delegations_down_is_answered_at_the_top(stack: Stack) -> None:
    worker, middle, boss = await delegation_chain(
        stack, [ask(), "Lisbon it is."], ("middle", "The worker picked."), ("boss", "All booked.")
    )
    session = uuid.uuid4().hex
    events = await stack.chat(boss, "Go.", session_id=session)

    # The top-level caller's stream carries the worker's request, with its delegation path, and
    # ends with the top run's suspension naming it; no run ended.
    top = events[0].run_id
    kinds = [kind(event) for event in events]
    assert kinds[-1] == "run_suspended" and events[-1].run_id == top, kinds
    assert kinds.count("run_suspended") == 1
    assert "run_completed" not in kinds and "run_failed" not in kinds
    (requested,) = [event.input_requested.request for event in events if event.HasField("input_requested")]
    assert requested.agent == worker.name and requested.question == QUESTION
    assert list(requested.delegation_path) == [boss.name, middle.name]
    assert list(events[-1].run_suspended.request_ids) == [requested.id]
    # Every run of the tree waits holding nothing.
    for agent in (boss, middle, worker):
        assert await stack.settled_status(agent) == "waiting"
    assert (await stack.stats()).active_runs == 0

    # The answer at the top reaches the worker; each run above goes on from its end, and the
    # responder's stream follows the top-level run to its end.
    resumed = await respond(stack, worker, requested.id, run_pb2.InputResponse(answer="Lisbon"))
    assert kind(resumed[-1]) == "run_completed" and resumed[-1].run_id == top
    assert resumed[-1].run_completed.content == "All booked."
    (result,) = [event.tool_result for event in resumed if event.HasField("tool_result")]
    assert result.name == "ask_user" and result.output == "Lisbon"
    responses = {e.agent: e.delegation_response for e in resumed if e.HasField("delegation_response")}
    assert responses[middle.name].content == "Lisbon it is."
    assert responses[boss.name].content == "The worker picked."
    assert all(r.outcome == run_pb2.DELEGATION_OUTCOME_COMPLETED for r in responses.values())

    # One end per run, one response per delegation.
    logged = await stack.events(session)
    ends = [e.run_id for e in logged if e.idempotency_key.endswith(":end")]
    assert len(ends) == 3 and len(set(ends)) == 3
    assert [event_type(e) for e in logged].count("delegation_response") == 2
    for agent in (boss, middle, worker):
        assert await stack.settled_status(agent) == "idle"


async def test_a_worker_asking_again_suspends_the_tree_again_and_each_run_ends_once(stack: Stack) -> None:
    worker, boss = await delegation_chain(
        stack, [ask(), ask("And which hotel?"), "Booked twice."], ("boss", "All booked.")
    )
    session = uuid.uuid4().hex
    first = await stack.chat(boss, "Go.", session_id=session)
    top = first[0].run_id

    second = await respond(
        stack, worker, first[-1].run_suspended.request_ids[0], run_pb2.InputResponse(answer="Rome")
    )
    # The responder's stream is the top-level run's: it ends with that run's suspension.
    assert kind(second[-1]) == "run_suspended" and second[-1].run_id == top
    assert not second[-1].delegation_path
    (asked,) = [e.input_requested.request for e in second if e.HasField("input_requested")]
    assert asked.question == "And which hotel?" and list(second[-1].run_suspended.request_ids) == [asked.id]

    third = await respond(stack, worker, asked.id, run_pb2.InputResponse(answer="The Grand"))
    assert kind(third[-1]) == "run_completed" and third[-1].run_id == top
    assert third[-1].run_completed.content == "All booked."
    logged = await stack.events(session)
    ends = [e.run_id for e in logged if e.idempotency_key.endswith(":end")]
    assert sorted(ends) == sorted({top, asked.run_id})
    assert [event_type(e) for e in logged].count("delegation_response") == 1


async def test_responses_are_checked(stack: Stack) -> None:
    agent = await asking_agent(stack)
    events = await stack.chat(agent, "Book me a trip.")
    request_id = events[-1].run_suspended.request_ids[0]
    for wrong in (
        run_pb2.InputResponse(),  # neither an answer nor a decision
        run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_APPROVE),  # a decision on a question
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await respond(stack, agent, request_id, wrong)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await respond(stack, agent, str(uuid.uuid4()), run_pb2.InputResponse(answer="x"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    # Nothing was taken: the request still waits, and its answer still resumes the run.
    await eventually(lambda: _waiting(stack, agent), what="the agent still waits")
    assert (await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Bern")))[-1].HasField(
        "run_completed"
    )


async def _waiting(stack: Stack, agent: Agent) -> bool:
    return await stack.status(agent) == "waiting"


@pytest.mark.parametrize("policy", ["enqueue", "reject", "interrupt"])
async def test_a_session_waiting_for_a_person_refuses_new_messages_until_answered(
    stack: Stack, policy: str
) -> None:
    agent = await asking_agent(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "Book me a trip.", session_id=session)
    request_id = events[-1].run_suspended.request_ids[0]

    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(
            agent=agent.ref, message="Anything new?", session_id=session, double_texting=policy
        ),
        metadata=stack.metadata,
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async for _ in call:
            pass
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert request_id in (refused.value.details() or "")

    # The waiting run was not touched (not interrupted): the answer resumes it; then the session
    # takes messages again (the script starts over for a new run: it asks again).
    resumed = await respond(stack, agent, request_id, run_pb2.InputResponse(answer="Lisbon"))
    assert resumed[-1].run_completed.content == "Booked."
    after = await stack.chat(agent, "Anything new?", session_id=session)
    assert kind(after[0]) == "run_started" and kind(after[-1]) == "run_suspended"
