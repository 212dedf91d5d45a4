"""GetTask and ListTasks on every binding, through the official a2a-sdk client, on a run whose
log is longer than its task (tool calls and their results): `historyLength` gives that many
messages of the task's history, newest last, whatever else the run recorded; the task's state,
answer and time are the same whatever history is asked for."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2

from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.support import Api
from tests.polling import eventually

State = a2a_pb2.TaskState
pytestmark = pytest.mark.parametrize("binding", BINDINGS)

CLOCK = {"content": "", "tool_calls": [{"name": "get_current_time", "arguments": {}}]}


def texts(task: a2a_pb2.Task) -> list[tuple[int, str]]:
    return [(message.role, "".join(part.text for part in message.parts)) for message in task.history]


async def test_history_length_bounds_a_tasks_history_and_nothing_else(
    binding: str, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(
        mock_responses=[CLOCK, CLOCK, CLOCK, "It is now."], type_fields={"tools": ["get_current_time"]}
    )
    card = await fetch_card(http, agent)
    async with a2a_client(card, binding, agent.owner.token) as client:
        sent = [r async for r in client.send_message(send_request("What time is it?"))]
        task_id, context_id = next((r.task.id, r.task.context_id) for r in sent if r.HasField("task"))

        async def done() -> bool:
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            return task.status.state == State.TASK_STATE_COMPLETED

        await eventually(done, timeout=30, what="the task completing")
        whole = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        assert texts(whole) == [
            (a2a_pb2.Role.ROLE_USER, "What time is it?"),
            (a2a_pb2.Role.ROLE_AGENT, "It is now."),
        ]
        last = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id, history_length=1))
        assert texts(last) == [(a2a_pb2.Role.ROLE_AGENT, "It is now.")]
        none = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id, history_length=0))
        assert texts(none) == []
        for task in (last, none):
            assert task.status.state == State.TASK_STATE_COMPLETED
            assert task.status.timestamp == whole.status.timestamp
            assert task.artifacts == whole.artifacts
            assert task.status.message == whole.status.message

        listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=context_id, history_length=1))
        assert [(t.id, t.status.state) for t in listed.tasks] == [(task_id, State.TASK_STATE_COMPLETED)]
        assert texts(listed.tasks[0]) == [(a2a_pb2.Role.ROLE_AGENT, "It is now.")]
