"""A resumed run whose open delegation went to a remote A2A agent sends the task at most once
(docs/durability.md, "Resumption from the log"): a delegating run records the remote task's
id the moment the remote names it (an `error` note, reason REMOTE_TASK_ACCEPTED); the run's taker
follows that task to its end — `tasks/resubscribe` when the remote's card says it streams, else
`tasks/get` — and records its one `delegation_response`; with no task id recorded the send is in
doubt, and the delegation is answered as such (not sent again). A remote's question nobody answers
expires: the run's taker cancels the remote task. The remote is an a2a-sdk server
on loopback that counts the tasks it is given (`a2a_sample.py`); the dead executor's log is
written by hand, as in test_resume_from_log.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2

from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.resume_support import (  # noqa: F401 (module fixtures)
    LEASE_SECONDS,
    DeadRun,
    as_dicts,
    executor_settings,
    registry_settings,
    step,
)
from tests.integration.executor.support import Agent, Event, EventType, Project, Stack
from tests.integration.gateway.a2a_sample import ASK, HOLD, STREAM, SampleServer, sample_server
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]


async def _delegator(stack: Stack, remote: SampleServer) -> tuple[Project, Agent]:
    """A project with the remote agent `translator` and a `boss` whose logged step delegated to
    it (the script's first item is never asked again; the second is its answer)."""
    project = await stack.project()
    await _register(stack, project, remote)
    boss = await stack.agent(
        project, "boss", mock_responses=["never asked", "done"], network_access=["translator"]
    )
    return project, boss


async def _live_delegator(
    stack: Stack, remote: SampleServer, task: str, *, input_expiry_seconds: int = 0
) -> Agent:
    """A project with the remote agent `translator` and a `boss` whose first step delegates `task`
    to it, then answers "done"."""
    project = await stack.project()
    await _register(stack, project, remote)
    delegate = {
        "content": "",
        "tool_calls": [{"name": "delegate", "arguments": {"agent": "translator", "task": task}}],
    }
    return await stack.agent(
        project,
        "boss",
        mock_responses=[delegate, "done"],
        network_access=["translator"],
        input_expiry_seconds=input_expiry_seconds,
    )


@asynccontextmanager
async def _a2a_client(remote: SampleServer) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, remote.url, agent_card_path="").get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)


async def _get_remote_task(remote: SampleServer, task_id: str) -> a2a_pb2.Task:
    async with _a2a_client(remote) as client:
        return await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))


async def _send_to_remote(remote: SampleServer, task: str, context_id: str) -> a2a_pb2.Task:
    """What the dead executor did before it died: the task sent (answered at once, the remote
    goes on working)."""
    async with _a2a_client(remote) as client:
        request = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id=uuid.uuid4().hex,
                context_id=context_id,
                role=a2a_pb2.Role.ROLE_USER,
                parts=[a2a_pb2.Part(text=task)],
            ),
            configuration=a2a_pb2.SendMessageConfiguration(return_immediately=True),
        )
        async for response in client.send_message(request):
            assert response.HasField("task"), response
            return response.task
    raise AssertionError("the remote answered nothing")


async def _open_delegation(run: DeadRun, delegation_id: str, task: str) -> Event:
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    (request,) = await run.record(
        run.event(
            EventType.EVENT_TYPE_DELEGATION_REQUEST,
            {"agent": "translator", "task": task},
            delegation_id=delegation_id,
            parent_event_id=received.id,
            target_agent="translator",
            **step("d1", 0),
        )
    )
    return request


def _responses(events: list[Event]) -> list[Event]:
    return [e for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE]


def _reason(event: Event) -> str:
    return event.metadata["reason"] if "reason" in event.metadata.fields else ""


async def _register(stack: Stack, project: Project, remote: SampleServer) -> None:
    await stack.client.registry.CreateRemoteAgent(
        reg.CreateRemoteAgentRequest(
            remote_agent=resources_pb2.RemoteAgent(
                project_id=project.id, name="translator", card_url=remote.url
            )
        ),
        metadata=stack.metadata,
    )


@pytest.mark.parametrize("streaming", [True, False], ids=["resubscribe", "polling"])
async def test_a_known_remote_task_is_followed_to_its_end_and_not_sent_again(
    stack: Stack, streaming: bool
) -> None:
    async with sample_server(streaming=streaming) as remote:
        _, boss = await _delegator(stack, remote)
        run = DeadRun(stack, boss)
        delegation_id = uuid.uuid4().hex
        request = await _open_delegation(run, delegation_id, STREAM)
        task = await _send_to_remote(remote, STREAM, run.session_id)
        await run.record(
            run.event(
                EventType.EVENT_TYPE_ERROR,
                f"translator accepted the delegation as its task {task.id}",
                delegation_id=delegation_id,
                parent_event_id=request.id,
                reason="REMOTE_TASK_ACCEPTED",
                remote_task_id=task.id,
                remote_context_id=task.context_id,
            )
        )
        await run.orphan()

        async def resumed() -> bool:
            events = await stack.events(run.session_id)
            return any(_reason(e) == "RUN_RESUMED" for e in events)

        await eventually(resumed, timeout=LEASE_SECONDS * 20, what="the run is resumed")
        # The remote finishes its task only now, while the resumed run follows it.
        remote.agent.release.set()
        events = await run.ended()

    assert len(remote.agent.seen_headers) == 1, "the remote was given the task once"
    (response,) = _responses(events)
    assert json.loads(response.content) == {
        "agent": "translator",
        "outcome": "completed",
        "content": "bonjour",
    }
    assert response.delegation_id == delegation_id and response.parent_event_id == request.id
    (answer,) = [
        e for e in events if e.run_id == run.run_id and e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE
    ]
    assert answer.content == "done"
    assert log_problems(as_dicts(events)) == []


async def test_a_remote_delegation_whose_send_is_in_doubt_is_not_sent_again(stack: Stack) -> None:
    async with sample_server() as remote:
        _, boss = await _delegator(stack, remote)
        run = DeadRun(stack, boss)
        delegation_id = uuid.uuid4().hex
        await _open_delegation(run, delegation_id, STREAM)  # no REMOTE_TASK_ACCEPTED: in doubt
        await run.orphan()
        events = await run.ended()

    assert remote.agent.seen_headers == [], "a send in doubt is not sent again"
    (response,) = _responses(events)
    content = json.loads(response.content)
    assert content["outcome"] == "failed"
    assert "outcome is unknown" in content["content"] and "not sent again" in content["content"]
    assert response.metadata.fields["in_doubt"].bool_value is True
    (answer,) = [
        e for e in events if e.run_id == run.run_id and e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE
    ]
    assert answer.content == "done"
    assert log_problems(as_dicts(events)) == []


async def test_a_live_remote_delegation_records_the_remote_task_it_became(stack: Stack) -> None:
    async with sample_server() as remote:
        boss = await _live_delegator(stack, remote, HOLD)
        session_id = f"s-{uuid.uuid4().hex[:8]}"
        chat = stack.client.gateway.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=boss.ref, message="go", session_id=session_id),
            metadata=stack.metadata,
        )
        notes: list[Event] = []

        async def noted() -> bool:
            try:
                events = await stack.events(session_id)
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    return False  # the chat has not recorded its input yet
                raise
            notes[:] = [e for e in events if _reason(e) == "REMOTE_TASK_ACCEPTED"]
            return bool(notes)

        await eventually(noted, timeout=30, what="the remote task is noted")
        (note,) = notes
        # The noted id is the remote's task, holding the delegated task.
        task = await _get_remote_task(remote, note.metadata["remote_task_id"])
        assert [part.text for part in task.history[0].parts] == [HOLD]
        chat.cancel()

    (request,) = [
        e for e in await stack.events(session_id) if e.event_type == EventType.EVENT_TYPE_DELEGATION_REQUEST
    ]
    assert note.delegation_id == request.delegation_id and note.parent_event_id == request.id
    assert note.metadata["remote_context_id"] == session_id
    assert "code" not in note.metadata.fields  # a note: the run goes on


async def test_a_remote_question_nobody_answers_cancels_the_remote_task(stack: Stack) -> None:
    """The delegating run suspends with the remote's question; at the request's expiry its taker
    cancels the remote task and tells the model the delegation ended without an answer."""
    async with sample_server() as remote:
        boss = await _live_delegator(stack, remote, ASK, input_expiry_seconds=1)
        session_id = f"s-{uuid.uuid4().hex[:8]}"
        events = await stack.chat(boss, "go", session_id=session_id)
        assert events[-1].WhichOneof("kind") == "run_suspended"

        async def ended() -> bool:
            return any(e.idempotency_key.endswith(":end") for e in await stack.events(session_id))

        await eventually(ended, timeout=60, what="the run goes on after the question expired")
        cancelled = list(remote.agent.cancelled)

    events = await stack.events(session_id)
    (note,) = [e for e in events if _reason(e) == "REMOTE_TASK_ACCEPTED"]
    assert cancelled == [note.metadata["remote_task_id"]] and remote.agent.answers == []
    (response,) = _responses(events)
    content = json.loads(response.content)
    assert content["outcome"] == "cancelled" and "ended without an answer" in content["content"]
    (answer,) = [e for e in events if e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE]
    assert answer.content == "done"
    assert log_problems(as_dicts(events)) == []
