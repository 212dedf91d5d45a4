"""A2A tasks live in the event log, not in a gateway process: a client streams a
delegating task from one gateway process, hangs up mid-delegation, and resubscribes through
another gateway process over the same services — it gets the task first, then the rest of its
steps, and the stream closes when the task ends. The official a2a-sdk client, every service its
own OS process."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.faults.processes import Processes, seed_delegating_pair
from tests.integration.gateway.a2a_client import a2a_client, send_request
from tests.mesh import MeshClient, Seeded

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(180)]

State = a2a_pb2.TaskState
# Some seconds of the worker's answer still to come when the client hangs up.
SLOW_WORKER = {"content": "part " * 200, "delay_seconds": 0.05}


async def _card(http_url: str, agent: Seeded) -> a2a_pb2.AgentCard:

    url = f"{http_url}/agents/{agent.project_slug}/{agent.agent_name}/.well-known/agent-card.json"
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(url, headers={"Authorization": f"Bearer {agent.token}"})
    assert response.status_code == 200, response.text
    return json_format.ParseDict(response.json(), a2a_pb2.AgentCard(), ignore_unknown_fields=True)


async def test_a_task_is_followed_to_its_end_through_another_gateway_process(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        _, coordinator = await seed_delegating_pair(client, token, worker=[SLOW_WORKER])
    finally:
        await client.close()
    second = await mesh.add_gateway("gateway-2")
    first_card = await _card(mesh.gateway.http_url, coordinator)
    second_card = await _card(second.http_url, coordinator)
    assert first_card.supported_interfaces[0].url != second_card.supported_interfaces[0].url

    async with a2a_client(first_card, "JSONRPC", coordinator.token) as a2a:
        stream = a2a.send_message(send_request("go"))
        task = (await anext(stream)).task
        async for response in stream:
            if response.HasField("status_update") and "delegates to worker" in (
                response.status_update.status.message.parts[0].text
            ):
                break  # hang up mid-delegation: the task goes on without this client
        await stream.aclose()

    async with a2a_client(second_card, "JSONRPC", coordinator.token) as a2a:
        resumed = [r async for r in a2a.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task.id))]
        assert resumed[0].WhichOneof("payload") == "task"
        assert resumed[0].task.id == task.id
        said = [r.status_update.status.message.parts[0].text for r in resumed if r.HasField("status_update")]
        assert any(text.startswith("worker answered coordinator (completed)") for text in said), said
        last = resumed[-1].status_update
        assert last.status.state == State.TASK_STATE_COMPLETED
        assert last.status.message.parts[0].text == "done"
