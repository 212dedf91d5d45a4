"""A2A tasks live in the event log, not in a gateway: a client that streamed a task from one
gateway and hung up resubscribes through another gateway over the same services, gets the task
first and then the rest of its steps, and the stream closes when the task ends. Run over each
binding with the official a2a-sdk client."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, fetch_card, send_request
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.delegating import delegating_agents
from tests.integration.gateway.support import Api

State = a2a_pb2.TaskState


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_task_streamed_from_one_gateway_is_followed_to_its_end_through_another(
    binding: str, api: Api, http: httpx.AsyncClient, mesh: Mesh
) -> None:
    slow_worker = {"content": "part " * 100, "delay_seconds": 0.05}
    _, coordinator = await delegating_agents(api, worker_answer=slow_worker)
    token = coordinator.owner.token
    first_card = await fetch_card(http, coordinator)
    # Up before the task starts, so the rest of the task is still to come when the client
    # switches over (the worker takes some seconds after the hang-up).
    second = await start_gateway(mesh)
    try:
        second_card = await fetch_card(http, coordinator, base_url=second.http.url)  # type: ignore[attr-defined]
        async with a2a_client(first_card, binding, token) as client:
            stream = client.send_message(send_request("go"))
            task = (await anext(stream)).task
            async for response in stream:
                if response.HasField("status_update") and "delegates to worker" in (
                    response.status_update.status.message.parts[0].text
                ):
                    break  # hang up mid-delegation: the task goes on without this client
            await stream.aclose()

        async with a2a_client(second_card, binding, token) as client:
            resumed = [r async for r in client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task.id))]
            assert resumed[0].WhichOneof("payload") == "task"
            assert resumed[0].task.id == task.id
            said = [
                r.status_update.status.message.parts[0].text for r in resumed if r.HasField("status_update")
            ]
            assert any(text.startswith("worker answered coordinator (completed)") for text in said), said
            last = resumed[-1].status_update
            assert last.status.state == State.TASK_STATE_COMPLETED
            assert last.status.message.parts[0].text == "done"

            # The task has ended: it is there to read, but there is nothing left to follow.
            got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
            assert got.status.state == State.TASK_STATE_COMPLETED
            with pytest.raises(a2a_errors.UnsupportedOperationError, match="already ended"):
                [r async for r in client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task.id))]
    finally:
        await second.stop(1)
