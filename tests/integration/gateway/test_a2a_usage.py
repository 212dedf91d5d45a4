"""What a task used travels in its A2A metadata (`agentmesh.usage`), on every binding, so an
agentmesh that delegates to it over A2A rolls it into its own run's usage: the tokens, and the
cost as null when the model has no price (unknown, not free) — in the answer, and in the task
read back later (GetTask)."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import json_format

from tests.integration.gateway.a2a_client import BINDINGS, agent_client, send_request
from tests.integration.gateway.support import Api

pytestmark = pytest.mark.parametrize("binding", BINDINGS)


async def test_a_completed_task_says_what_it_used(
    binding: str, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    answer = {"content": "done", "usage": {"input_tokens": 70, "output_tokens": 5, "cached_input_tokens": 30}}
    async with agent_client(api, http, binding, answers=[answer]) as (_agent, client):
        [served] = [r async for r in client.send_message(send_request("hi"))]
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=served.task.id))

    assert served.task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
    usage = json_format.MessageToDict(served.task.metadata)["agentmesh"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["cached_input_tokens"]) == (70, 5, 30)
    assert usage["cost"] is None and usage["unpriced_models"] == ["mock"]
    assert json_format.MessageToDict(got.metadata)["agentmesh"]["usage"] == usage
