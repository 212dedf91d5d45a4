"""A run that asks a person, over A2A, on every binding through the official a2a-sdk client: the
task goes `input-required` with the question (text) and the request (a data part), live and when
read back from the log; the next message on the task answers it and the task goes on to its end,
streamed or returned as a new message's would be. A reply that does not fit is the spec's
InvalidParamsError; a request someone else answered meanwhile, UnsupportedOperationError. A
cancel cancels the waiting run: the task is `canceled`, its request closed, and the context takes
the next message. A worker the agent delegated to asks the same way: the task is
`input-required` with the worker's question, and the answer goes on to the agent's own end.

Approvals (a tool whose permission is `ask`): "approve" runs the call, a reply that is neither
approve nor deny is InvalidParamsError; the other replies' readings are in
tests/unit/gateway/test_answers.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.client import Client
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.delegating import asking_worker_and_coordinator
from tests.integration.gateway.support import Agent, Api, asking_agent

State = a2a_pb2.TaskState
QUESTION = "Which city should I book?"
pytestmark = pytest.mark.parametrize("binding", BINDINGS)


def answer(text: str, task: a2a_pb2.Task) -> a2a_pb2.SendMessageRequest:
    request = send_request(text)
    request.message.task_id = task.id
    return request


def data_answer(data: dict, task: a2a_pb2.Task) -> a2a_pb2.SendMessageRequest:
    """A structured reply: the fields REST takes, in a data part."""
    request = answer("", task)
    fields = Struct()
    fields.update(data)
    request.message.parts[0].CopyFrom(a2a_pb2.Part(data=Value(struct_value=fields)))
    return request


@asynccontextmanager
async def waiting_task(
    api: Api, http: httpx.AsyncClient, binding: str, then: str
) -> AsyncIterator[tuple[Agent, Client, a2a_pb2.Task]]:
    """An agent that asked QUESTION (and answers `then` after), its client, and the task."""
    agent = await asking_agent(api, QUESTION, then)
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        [first] = await sent(client, send_request("Book me a trip."))
        yield agent, client, first.task


def asked(message: a2a_pb2.Message) -> dict:
    """The request a status message carries in its data part."""
    [data] = [part.data for part in message.parts if part.HasField("data")]
    return MessageToDict(data)["input_request"]


async def sent(client: Client, request: a2a_pb2.SendMessageRequest) -> list[a2a_pb2.StreamResponse]:
    return [response async for response in client.send_message(request)]


async def test_the_next_message_answers_the_task_s_question(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    async with waiting_task(api, http, binding, "Booked Lisbon.") as (agent, client, task):
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED, task.status
        assert task.status.message.parts[0].text == QUESTION
        request = asked(task.status.message)
        assert (request["kind"], request["question"]) == ("question", QUESTION)
        assert request["id"] and request["expires_at"]

        # The log tells the same: any replica reads the task as waiting, with the same request.
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_INPUT_REQUIRED
        assert asked(got.status.message)["id"] == request["id"]

        [second] = await sent(client, answer("Lisbon", task))
        done = second.task
        assert done.id == task.id and done.status.state == State.TASK_STATE_COMPLETED, done.status
        assert done.artifacts[0].parts[0].text == "Booked Lisbon."

        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_COMPLETED
        said = [(m.role, m.parts[0].text) for m in got.history]
        assert said[0] == (a2a_pb2.Role.ROLE_USER, "Book me a trip.")
        assert (a2a_pb2.Role.ROLE_USER, "Lisbon") in said
        assert said[-1] == (a2a_pb2.Role.ROLE_AGENT, "Booked Lisbon.")
        events = await api.session_events(agent, task.context_id)
    [result] = [e for e in events if e["event_type"] == "tool_result"]
    assert result["content"] == "Lisbon"
    assert [e["event_type"] for e in events].count("user_message") == 1  # no new run was started


async def test_streaming_shows_the_question_and_then_the_resumed_run(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await asking_agent(api, QUESTION, "Booked Oslo.")
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token) as client:
        first = await sent(client, send_request("Book me a trip."))
        assert first[0].task.status.state == State.TASK_STATE_WORKING
        last = first[-1].status_update.status
        assert last.state == State.TASK_STATE_INPUT_REQUIRED
        assert last.message.parts[0].text == QUESTION and asked(last.message)["kind"] == "question"
        task = first[0].task

        second = await sent(client, data_answer({"answer": "Oslo"}, task))
        assert second[0].task.id == task.id
        assert second[0].task.status.state == State.TASK_STATE_WORKING
        final = second[-1].status_update.status
        assert final.state == State.TASK_STATE_COMPLETED and final.message.parts[0].text == "Booked Oslo."
        chunks = [r.artifact_update.artifact.parts[0].text for r in second if r.HasField("artifact_update")]
        assert "".join(chunks) == "Booked Oslo."


async def test_cancelling_an_input_required_task_cancels_its_run(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    async with waiting_task(api, http, binding, "Booked.") as (agent, client, task):
        request_id = asked(task.status.message)["id"]
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.id == task.id and cancelled.status.state == State.TASK_STATE_CANCELED, (
            cancelled.status
        )
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_CANCELED
        # Its request is closed: answering it over REST is refused, saying the run was cancelled.
        refused = await http.post(
            f"/api/v1/projects/{agent.project_id}/input-requests/{request_id}/respond",
            json={"answer": "Rome"},
            headers=agent.owner.headers,
        )
        assert refused.status_code == 409 and "cancelled" in refused.text, refused.text
        # The context takes a new task (the script starts over: it asks again).
        request = send_request("Book me another trip.")
        request.message.context_id = task.context_id
        [again] = await sent(client, request)
        assert again.task.id != task.id and again.task.status.state == State.TASK_STATE_INPUT_REQUIRED


async def test_a_reply_that_does_not_fit_is_refused_and_the_task_still_waits(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with waiting_task(api, http, binding, "Booked.") as (_, client, task):
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"message\.parts: .*answer it with any text"):
            await sent(client, answer("   ", task))
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"message\.parts\[0\]\.data\.answer"):
            await sent(client, data_answer({"decision": "approve"}, task))
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_INPUT_REQUIRED
        [done] = await sent(client, answer("Rome", task))
        assert done.task.status.state == State.TASK_STATE_COMPLETED


async def test_deny_declines_the_question_and_the_model_is_told(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with waiting_task(api, http, binding, "I will choose for you.") as (agent, client, task):
        [done] = await sent(client, answer("deny: rather not say", task))
        assert done.task.status.state == State.TASK_STATE_COMPLETED, done.task.status
        events = await api.session_events(agent, task.context_id)
    [received] = [e for e in events if e["event_type"] == "input_received"]
    assert '"decision": "deny"' in received["content"]
    [result] = [e for e in events if e["event_type"] == "tool_result"]
    assert result["content"].startswith("ask_user: no answer: ")
    assert result["content"].endswith(" declined to answer: rather not say")


async def test_of_two_answers_at_once_one_counts_the_other_names_the_state(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with waiting_task(api, http, binding, "Booked.") as (_, client, task):
        replies = await asyncio.gather(
            sent(client, answer("Paris", task)), sent(client, answer("Vienna", task)), return_exceptions=True
        )
    refused = [r for r in replies if isinstance(r, BaseException)]
    assert len(refused) == 1, replies
    assert isinstance(refused[0], a2a_errors.UnsupportedOperationError), refused
    assert "no longer input-required" in str(refused[0])
    [won] = [r for r in replies if not isinstance(r, BaseException)]
    assert won[0].task.status.state == State.TASK_STATE_COMPLETED


async def test_an_approval_is_answered_with_approve_and_the_call_runs(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    clock = {"content": "", "tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}
    agent = await api.agent(
        mock_responses=[clock, "It is late."],
        type_fields={"tools": ["get_current_time"], "tool_permissions": {"get_current_time": "ask"}},
    )
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        [first] = await sent(client, send_request("What time is it?"))
        task = first.task
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED, task.status
        request = asked(task.status.message)
        assert (request["kind"], request["tool"]) == ("approval", "get_current_time")

        with pytest.raises(
            a2a_errors.InvalidParamsError, match=r"asks for an approval: reply 'approve' or 'deny'"
        ):
            await sent(client, answer("maybe", task))
        [done] = await sent(client, answer("Approve", task))
        assert done.task.status.state == State.TASK_STATE_COMPLETED, done.task.status
        assert done.task.artifacts[-1].parts[0].text == "It is late."


async def test_a_delegated_workers_question_makes_the_task_input_required(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    _, coordinator = await asking_worker_and_coordinator(api, QUESTION, "Lisbon it is.")
    card = await fetch_card(http, coordinator)
    async with a2a_client(card, binding, coordinator.owner.token, streaming=False) as client:
        [first] = await sent(client, send_request("Book me a trip."))
        task = first.task
        assert task.status.state == State.TASK_STATE_INPUT_REQUIRED, task.status
        assert asked(task.status.message)["question"] == QUESTION
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_INPUT_REQUIRED
        assert asked(got.status.message)["id"] == asked(task.status.message)["id"]

        [second] = await sent(client, answer("Lisbon", task))
        done = second.task
        assert done.id == task.id and done.status.state == State.TASK_STATE_COMPLETED, done.status
        assert done.artifacts[0].parts[0].text == "Coordinated."
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_COMPLETED
