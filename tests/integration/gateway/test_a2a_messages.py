"""What a message must be to start a task, on every binding through the official a2a-sdk client:
the fields the spec requires, and a task that has ended takes no more messages. Nothing is
recorded for a message that is refused."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors

from tests.integration.gateway.a2a_client import BINDINGS, agent_client, send_request
from tests.integration.gateway.support import Api

State = a2a_pb2.TaskState
pytestmark = pytest.mark.parametrize("binding", BINDINGS)


async def test_a_message_without_a_required_field_is_refused_naming_it(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with agent_client(api, http, binding, answers=["hi"]) as (_agent, client):
        for field in ("message_id", "role", "parts"):
            request = send_request("hi")
            request.message.context_id = f"refused-{field}"
            request.message.ClearField(field)
            named = rf"^message\.{field}: (is required|must contain)"
            with pytest.raises(a2a_errors.InvalidParamsError, match=named):
                [r async for r in client.send_message(request)]
            listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=f"refused-{field}"))
            assert list(listed.tasks) == []  # nothing was started
        # A context the agent cannot take is refused (the spec: never swapped for a new one).
        request = send_request("hi")
        request.message.context_id = "not a context name!"
        with pytest.raises(a2a_errors.InvalidParamsError, match=r"message\.context_id"):
            [r async for r in client.send_message(request)]
        [served] = [r async for r in client.send_message(send_request("hi"))]
        assert served.task.status.state == State.TASK_STATE_COMPLETED


async def test_a_task_that_ended_takes_no_more_messages(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    async with agent_client(api, http, binding, answers=["done"]) as (agent, client):
        [first] = [r async for r in client.send_message(send_request("hi"))]
        assert first.task.status.state == State.TASK_STATE_COMPLETED

        follow_up = send_request("and then?")
        follow_up.message.task_id = first.task.id
        with pytest.raises(a2a_errors.UnsupportedOperationError, match="has ended"):
            [r async for r in client.send_message(follow_up)]
        events = await api.session_events(agent, first.task.context_id)
        assert [e["event_type"] for e in events] == ["user_message", "agent_response"]

        # The next task in that context: the same message without task_id.
        follow_up.message.ClearField("task_id")
        follow_up.message.context_id = first.task.context_id
        [second] = [r async for r in client.send_message(follow_up)]
        assert second.task.context_id == first.task.context_id and second.task.id != first.task.id
        assert second.task.status.state == State.TASK_STATE_COMPLETED
