"""Every agent is an A2A v1.0 server through the gateway: one suite, run with the official a2a-sdk
client over each binding (JSON-RPC, HTTP+JSON, gRPC `lf.a2a.v1.A2AService`), against a real mesh.
A task is a run, its context the session, its state the event log."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf.struct_pb2 import Struct, Value

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.delegating import delegating_agents
from tests.integration.gateway.support import Api
from tests.polling import eventually

State = a2a_pb2.TaskState
pytestmark = pytest.mark.parametrize("binding", BINDINGS)


async def test_send_message_runs_the_agent_and_returns_the_completed_task(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(mock_responses=["hello from the mesh"])
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        [response] = [r async for r in client.send_message(send_request("hi"))]
        task = response.task
        assert task.status.state == State.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "hello from the mesh"
        assert [m.role for m in task.history] == [a2a_pb2.Role.ROLE_USER, a2a_pb2.Role.ROLE_AGENT]
        assert task.history[0].parts[0].text == "hi"

        # The task is the run in the log: any call finds it, with its context (= session).
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_COMPLETED
        assert got.context_id == task.context_id
        assert got.artifacts[0].parts[0].text == "hello from the mesh"
        events = await api.session_events(agent, task.context_id)
        assert [e["event_type"] for e in events] == ["user_message", "agent_response"]

        # A second message in the same context is a new task in the same session.
        follow_up = send_request("again")
        follow_up.message.context_id = task.context_id
        [second] = [r async for r in client.send_message(follow_up)]
        assert second.task.context_id == task.context_id and second.task.id != task.id

        listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [second.task.id, task.id]
        assert listed.total_size == 2


async def test_streaming_a_delegating_chat_shows_the_delegation_and_the_answer(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    _, coordinator = await delegating_agents(api)
    card = await fetch_card(http, coordinator)
    async with a2a_client(card, binding, coordinator.owner.token) as client:
        responses = [r async for r in client.send_message(send_request("go"))]
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task"
    assert responses[0].task.status.state == State.TASK_STATE_WORKING
    steps = [r.status_update for r in responses if r.HasField("status_update")]
    said = [s.status.message.parts[0].text for s in steps]
    assert any(text.startswith("coordinator delegates to worker: work") for text in said)
    assert any(text.startswith("worker answered coordinator (completed)") for text in said), said
    assert steps[-1].status.state == State.TASK_STATE_COMPLETED
    answer = "".join(
        r.artifact_update.artifact.parts[0].text for r in responses if r.HasField("artifact_update")
    )
    assert answer == "done"


async def test_data_parts_reach_the_model_as_json(binding: str, api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["got it"])
    card = await fetch_card(http, agent)
    data = Struct()
    data.update({"order": 42, "items": ["tea"]})
    message = a2a_pb2.Message(
        message_id="m-data",
        role=a2a_pb2.Role.ROLE_USER,
        parts=[a2a_pb2.Part(text="the order:"), a2a_pb2.Part(data=Value(struct_value=data))],
    )
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        [response] = [r async for r in client.send_message(a2a_pb2.SendMessageRequest(message=message))]
    assert response.task.status.state == State.TASK_STATE_COMPLETED
    events = await api.session_events(agent, response.task.context_id)
    user = next(e for e in events if e["event_type"] == "user_message")
    assert user["content"] == 'the order:\n{"items":["tea"],"order":42.0}'  # keys sorted: stable text


async def test_bad_requests_get_the_specs_errors(binding: str, api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["hi"])
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
        with pytest.raises(a2a_errors.TaskNotFoundError, match="not found"):
            await client.get_task(a2a_pb2.GetTaskRequest(id="no-such-run~no-such-session"))
        with pytest.raises(a2a_errors.TaskNotFoundError, match="not found"):
            await client.get_task(a2a_pb2.GetTaskRequest(id="not-a-task-id"))
        no_text = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id="m", role=a2a_pb2.Role.ROLE_USER, parts=[a2a_pb2.Part(raw=b"x")]
            )
        )
        with pytest.raises(a2a_errors.ContentTypeNotSupportedError, match=r"message.parts\[0\]"):
            [r async for r in client.send_message(no_text)]
        with pytest.raises(a2a_errors.TaskNotFoundError):
            await client.get_task_push_notification_config(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id="t", id="p")
            )
        done = (await anext(client.send_message(send_request("hi")))).task
        with pytest.raises(a2a_errors.TaskNotCancelableError, match="already ended"):
            await client.cancel_task(a2a_pb2.CancelTaskRequest(id=done.id))


async def test_cancel_mid_run_stops_the_worker(binding: str, api: Api, http: httpx.AsyncClient) -> None:
    slow_worker = {"content": "part " * 200, "delay_seconds": 0.05}
    worker, coordinator = await delegating_agents(api, worker_answer=slow_worker)
    card = await fetch_card(http, coordinator)
    async with a2a_client(card, binding, coordinator.owner.token, streaming=False, polling=True) as client:
        [started] = [r async for r in client.send_message(send_request("go"))]
        task = started.task
        assert task.status.state == State.TASK_STATE_WORKING

        async def worker_is_working() -> bool:
            return await api.status(worker) == "working"

        await eventually(worker_is_working)
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == State.TASK_STATE_CANCELED

        async def worker_is_idle() -> bool:
            return await api.status(worker) == "idle"

        await eventually(worker_is_idle)
        events = await api.session_events(coordinator, task.context_id)
        worker_end = [
            e for e in events if e["agent"] == "worker" and e["event_type"] in ("agent_response", "error")
        ]
        assert worker_end and worker_end[-1]["event_type"] == "error"  # stopped, did not answer
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert got.status.state == State.TASK_STATE_CANCELED


async def test_the_extended_card_needs_the_caller_and_lists_every_binding(
    binding: str, api: Api, http: httpx.AsyncClient, mesh: Mesh
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    card = await fetch_card(http, agent)
    assert {i.protocol_binding for i in card.supported_interfaces} == set(BINDINGS)
    grpc_interface = next(i for i in card.supported_interfaces if i.protocol_binding == "GRPC")
    assert grpc_interface.url == mesh.gateway.address
    assert grpc_interface.tenant == f"{agent.project_slug}/{agent.name}"
    async with a2a_client(card, binding, agent.owner.token) as client:
        extended = await client.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())
    assert extended.name == agent.name
    assert extended.capabilities.extended_agent_card
    stranger = await api.user()
    async with a2a_client(card, binding, stranger.token) as client:
        with pytest.raises((A2AClientError, a2a_errors.A2AError)):
            await client.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())
