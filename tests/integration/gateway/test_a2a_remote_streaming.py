"""Outbound A2A behaves as a local delegation does: the remote agent's updates stream up
into the delegating run's stream as a worker's steps while it works, cancelling the delegating run
cancels the remote task, and a remote task that stops in input-required suspends the delegating
run with its question, whose answer continues the remote task. The remote is an a2a-sdk sample
server (a2a_sample.py) or another mesh's agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from a2a.types import a2a_pb2

from agentmesh.cli.mesh import Mesh
from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.integration.gateway.a2a_sample import ASK, ASK_TWICE, HOLD, STREAM, sample_server, send_on_task
from tests.integration.gateway.support import Agent, Api, User, suffix
from tests.mesh import bearer
from tests.polling import eventually

Outcome = run_pb2.DelegationOutcome


@pytest_asyncio.fixture(loop_scope="package")
async def gateway(mesh: Mesh) -> AsyncIterator[gw_grpc.GatewayServiceStub]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield gw_grpc.GatewayServiceStub(channel)


async def coordinator_of(
    api: Api, http: httpx.AsyncClient, card_url: str, *tasks: str, credential: str = "", last: object = "done"
) -> tuple[User, Agent]:
    """A project with the remote agent `translator` registered and a coordinator that delegates
    each of `tasks` to it in turn, then answers `last` (a mock response: "done")."""
    owner = await api.user()
    project = await api.project(owner)
    body = {"name": "translator", "card_url": card_url, "credential": credential}
    created = await http.post(
        f"/api/v1/projects/{project['id']}/remote-agents", json=body, headers=owner.headers
    )
    assert created.status_code == 201, created.text
    delegations = [
        {
            "content": "",
            "tool_calls": [{"name": "delegate", "arguments": {"agent": "translator", "task": task}}],
        }
        for task in tasks
    ]
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project={"id": project["id"], "slug": project["slug"]},
        network_access=["translator"],
        mock_responses=[*delegations, last],
    )
    return owner, coordinator


def kind(event: run_pb2.RunEvent) -> str:
    return event.WhichOneof("kind") or ""


async def test_a_remote_agents_updates_stream_up_as_a_workers_steps(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub
) -> None:
    async with sample_server() as remote:
        owner, coordinator = await coordinator_of(api, http, remote.url, STREAM)
        call = gateway.StreamChat(
            gw.StreamChatRequest(agent=coordinator.model, message="go"), metadata=bearer(owner.token)
        )
        events: list[run_pb2.RunEvent] = []
        streamed = ""
        async for response in call:
            events.append(response.event)
            if response.event.agent == "translator" and kind(response.event) == "text_delta":
                streamed += response.event.text_delta.text
                if streamed.endswith("bon"):
                    # The first chunk arrived while the remote still holds the second back: it
                    # streams. (Deltas that queue up together may arrive merged, so it is the
                    # text so far that counts, not how many deltas carried it.)
                    assert not remote.agent.release.is_set()
                    remote.agent.release.set()
    below = [e for e in events if e.agent == "translator"]
    assert {tuple(e.delegation_path) for e in below} == {("coordinator",)}
    kinds = [kind(e) for e in below]
    assert kinds[:2] == ["run_started", "step_started"] and kinds[-1] == "run_completed"
    assert set(kinds[2:-1]) == {"text_delta"}
    # "looking it up" is the remote's working status, then the answer's two chunks.
    assert "".join(e.text_delta.text for e in below[2:-1]) == "looking it upbonjour"
    assert remote.agent.release.is_set()
    assert below[0].run_started.agent_kind == "a2a" and below[-1].run_completed.content == "bonjour"
    response = next(e.delegation_response for e in events if kind(e) == "delegation_response")
    assert (response.outcome, response.content) == (Outcome.DELEGATION_OUTCOME_COMPLETED, "bonjour")
    assert events[-1].run_completed.content == "done"


async def test_cancelling_the_delegating_run_cancels_the_remote_task(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub
) -> None:
    async with sample_server() as remote:
        owner, coordinator = await coordinator_of(api, http, remote.url, HOLD)
        session_id = f"hold-{suffix()}"
        call = gateway.StreamChat(
            gw.StreamChatRequest(agent=coordinator.model, message="go", session_id=session_id),
            metadata=bearer(owner.token),
        )
        async for response in call:
            if response.event.agent == "translator" and kind(response.event) == "text_delta":
                break  # the remote task is working
        call.cancel()

        async def remote_cancelled() -> bool:
            return len(remote.agent.cancelled) == 1

        await eventually(remote_cancelled, timeout=30, what="the remote task is cancelled")

        async def responded() -> bool:
            events = await api.session_events(coordinator, session_id)
            return any(e["event_type"] == "delegation_response" for e in events)

        await eventually(responded, timeout=30, what="the delegation's response is recorded")
    events = await api.session_events(coordinator, session_id)
    [answer] = [e for e in events if e["event_type"] == "delegation_response"]
    assert answer["metadata"]["outcome"] == "cancelled"


async def _asked(
    gateway: gw_grpc.GatewayServiceStub, owner: User, coordinator: Agent
) -> list[run_pb2.RunEvent]:
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, message="go"), metadata=bearer(owner.token)
    )
    return [response.event async for response in call]


async def _respond(
    gateway: gw_grpc.GatewayServiceStub,
    owner: User,
    coordinator: Agent,
    request_id: str,
    response: run_pb2.InputResponse,
) -> list[run_pb2.RunEvent]:
    call = gateway.RespondToInput(
        gw.RespondToInputRequest(project_id=coordinator.project_id, id=request_id, response=response),
        metadata=bearer(owner.token),
    )
    return [message.event async for message in call]


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "send"])
async def test_a_remote_that_asks_for_input_suspends_the_run_and_the_answer_continues_its_task(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub, streaming: bool
) -> None:
    # A card that does not stream: the delegation falls back to a send, which returns the task.
    async with sample_server(streaming=streaming) as remote:
        owner, coordinator = await coordinator_of(api, http, remote.url, ASK, last={"echo_prompt": True})
        events = await _asked(gateway, owner, coordinator)
        # The delegating run suspends with the remote's question, asked in the remote's name.
        assert kind(events[-1]) == "run_suspended"
        [asked] = [e.input_requested.request for e in events if kind(e) == "input_requested"]
        assert asked.kind == run_pb2.INPUT_KIND_QUESTION
        assert asked.question == "Which dialect of French?"
        assert (asked.agent, list(asked.delegation_path)) == ("translator", ["coordinator"])
        assert not [e for e in events if kind(e) == "delegation_response"], "the delegation stays open"
        session_id = events[-1].session_id

        resumed = await _respond(
            gateway, owner, coordinator, asked.id, run_pb2.InputResponse(answer="Quebec")
        )
        stored = await api.session_events(coordinator, session_id)

    # The answer went to the remote as the next message on the task it asked in.
    [note] = [e for e in stored if e["metadata"].get("reason") == "REMOTE_TASK_ACCEPTED"]
    assert remote.agent.answers == [(note["metadata"]["remote_task_id"], "Quebec")]
    [response] = [e.delegation_response for e in resumed if kind(e) == "delegation_response"]
    assert response.outcome == Outcome.DELEGATION_OUTCOME_COMPLETED
    assert response.content == "thanks, in the dialect of Quebec"
    # The delegating model went on with the remote's answer as the tool's result.
    assert kind(resumed[-1]) == "run_completed"
    assert "thanks, in the dialect of Quebec" in resumed[-1].run_completed.content
    ends = [e for e in stored if e["event_type"] == "agent_response"]
    responses = [e for e in stored if e["event_type"] == "delegation_response"]
    assert (len(ends), len(responses)) == (1, 1), "one end per run, one response per delegation"
    assert [e["event_type"] for e in stored].count("input_received") == 1


async def test_a_remote_that_asks_again_suspends_the_run_again(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub
) -> None:
    async with sample_server() as remote:
        owner, coordinator = await coordinator_of(
            api, http, remote.url, ASK_TWICE, last={"echo_prompt": True}
        )
        events = await _asked(gateway, owner, coordinator)
        [first] = [e.input_requested.request for e in events if kind(e) == "input_requested"]
        again = await _respond(gateway, owner, coordinator, first.id, run_pb2.InputResponse(answer="Quebec"))
        # The remote's second question on the same task: a new request, the run suspended again.
        assert kind(again[-1]) == "run_suspended"
        [second] = [e.input_requested.request for e in again if kind(e) == "input_requested"]
        assert second.question == "And which city?" and second.id != first.id
        resumed = await _respond(
            gateway, owner, coordinator, second.id, run_pb2.InputResponse(answer="Montreal")
        )
        stored = await api.session_events(coordinator, events[-1].session_id)
    [note] = [e for e in stored if e["metadata"].get("reason") == "REMOTE_TASK_ACCEPTED"]
    task_id = note["metadata"]["remote_task_id"]
    assert remote.agent.answers == [(task_id, "Quebec"), (task_id, "Montreal")]
    assert "thanks, in the dialect of Quebec Montreal" in resumed[-1].run_completed.content
    kinds = [e["event_type"] for e in stored]
    assert (kinds.count("delegation_response"), kinds.count("agent_response")) == (1, 1)
    assert (kinds.count("input_requested"), kinds.count("input_received")) == (2, 2)


async def _asks_once(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub, remote: Any
) -> tuple[User, Agent, run_pb2.InputRequest, list[run_pb2.RunEvent]]:
    """A coordinator whose remote asks ASK once: its owner, itself, the request and the events."""
    owner, coordinator = await coordinator_of(api, http, remote.url, ASK, last={"echo_prompt": True})
    events = await _asked(gateway, owner, coordinator)
    [asked] = [e.input_requested.request for e in events if kind(e) == "input_requested"]
    return owner, coordinator, asked, events


async def test_a_declined_remote_question_cancels_the_remote_task_and_the_model_is_told(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub
) -> None:
    async with sample_server() as remote:
        owner, coordinator, asked, _ = await _asks_once(api, http, gateway, remote)
        declined = run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_DENY, reason="not now")
        resumed = await _respond(gateway, owner, coordinator, asked.id, declined)
        assert remote.agent.answers == [] and len(remote.agent.cancelled) == 1
    [response] = [e.delegation_response for e in resumed if kind(e) == "delegation_response"]
    assert response.outcome == Outcome.DELEGATION_OUTCOME_CANCELLED
    assert response.content.endswith(f"{owner.email} declined to answer: not now")
    assert kind(resumed[-1]) == "run_completed"


async def test_a_remote_task_that_moved_on_before_the_answer_is_followed_from_its_state(
    api: Api, http: httpx.AsyncClient, gateway: gw_grpc.GatewayServiceStub
) -> None:
    async with sample_server() as remote:
        owner, coordinator, asked, events = await _asks_once(api, http, gateway, remote)
        stored = await api.session_events(coordinator, events[-1].session_id)
        [note] = [e for e in stored if e["metadata"].get("reason") == "REMOTE_TASK_ACCEPTED"]
        task_id, context_id = note["metadata"]["remote_task_id"], note["metadata"]["remote_context_id"]
        # Someone else answers the remote first: its task completes before the person answers.
        done = await send_on_task(remote, task_id, context_id, "Ontario")
        assert done == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        resumed = await _respond(
            gateway, owner, coordinator, asked.id, run_pb2.InputResponse(answer="Quebec")
        )
    assert remote.agent.answers == [(task_id, "Ontario")], "an answer to a task that moved on is not sent"
    [response] = [e.delegation_response for e in resumed if kind(e) == "delegation_response"]
    assert response.outcome == Outcome.DELEGATION_OUTCOME_COMPLETED
    assert response.content == "thanks, in the dialect of Ontario"
    assert "thanks, in the dialect of Ontario" in resumed[-1].run_completed.content


async def test_another_meshs_agent_streams_its_answer_up(
    api: Api, http: httpx.AsyncClient, mesh: Mesh, gateway: gw_grpc.GatewayServiceStub
) -> None:
    """The remote is an agentmesh agent reached through its card: its A2A stream (artifact chunks
    of its answer) arrives as the worker's text deltas."""
    far_owner = await api.user()
    far = await api.agent(far_owner, name="far-worker", mock_responses=["from far away, slowly"])
    card_url = f"{mesh.gateway.http.url}{far.base}/.well-known/agent-card.json"  # type: ignore[attr-defined]
    owner, coordinator = await coordinator_of(api, http, card_url, "ping", credential=far_owner.token)
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, message="go"), metadata=bearer(owner.token)
    )
    events = [response.event async for response in call]
    below = [e for e in events if e.agent == "translator"]
    assert kind(below[0]) == "run_started" and below[-1].run_completed.content == "from far away, slowly"
    assert "".join(e.text_delta.text for e in below if kind(e) == "text_delta") == "from far away, slowly"
    response = next(e.delegation_response for e in events if kind(e) == "delegation_response")
    assert response.outcome == Outcome.DELEGATION_OUTCOME_COMPLETED
