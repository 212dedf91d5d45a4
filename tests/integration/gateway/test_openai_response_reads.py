"""A response read back (`GET /v1/responses/{response_id}`) through the official `openai` client:
the same object the create call answered, plain and streamed, at the root (its project found from
the id, or from a scoped API key) and on the agent's own route; a run waiting for the client's
tools reads as its calls; an id that names nothing the caller may read is a 404 in OpenAI's shape;
a running response reads `in_progress`, and `cancelled` once its client left."""

from __future__ import annotations

import uuid
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Agent, Api
from tests.integration.gateway.test_api_keys import create_key
from tests.integration.gateway.test_disconnect import SLOW
from tests.integration.gateway.test_openai import ANSWER, agent_client, root_client
from tests.integration.gateway.test_openai_client_tools import RESPONSES_WEATHER, weather_agent
from tests.polling import eventually

_SHOWN = {"id", "status", "model", "output", "usage", "error", "incomplete_details"}


async def started_slowly(client: AsyncOpenAI, agent: Agent) -> tuple[str, Any]:
    """A slow response (its agent's model answers SLOW), streaming: its id once its answer
    began, and its stream."""
    stream = await client.responses.create(model=agent.model, input="tell me slowly", stream=True)
    response_id = ""
    async for event in stream:
        if event.type == "response.created":
            response_id = event.response.id
        if event.type == "response.output_text.delta":
            return response_id, stream
    raise AssertionError("the answer never began")


async def test_a_response_reads_back_as_it_was_answered(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[ANSWER])
    client = root_client(mesh, agent.owner.token)
    created = await client.responses.create(model=agent.model, input="What is the answer?")
    read = await client.responses.retrieve(created.id)
    assert read.model_dump(include=_SHOWN) == created.model_dump(include=_SHOWN)
    # Read back, it was created when its run's input was recorded: once the request came.
    assert read.output_text == ANSWER and read.created_at >= created.created_at

    stream = await client.responses.create(
        model=agent.model, input="Again?", previous_response_id=created.id, stream=True
    )
    done = [event async for event in stream][-1]
    assert done.type == "response.completed"
    again = await agent_client(mesh, agent.base, agent.owner.token).responses.retrieve(done.response.id)
    assert again.model_dump(include=_SHOWN) == done.response.model_dump(include=_SHOWN)

    # A key scoped to the project finds it too; another project's owner, and that project's
    # key, find nothing; nor does an id made up or malformed.
    key = (await create_key(api.http, agent.owner, project_id=agent.project_id))["key"]
    assert (await root_client(mesh, key).responses.retrieve(created.id)).id == created.id
    elsewhere = await api.agent(mock_responses=[ANSWER])
    other_key = (await create_key(api.http, elsewhere.owner, project_id=elsewhere.project_id))["key"]
    made_up = f"resp_{uuid.uuid4().hex}_{created.id.rpartition('_')[2]}"
    for token, response_id in (
        (elsewhere.owner.token, created.id),
        (other_key, created.id),
        (agent.owner.token, made_up),
        (agent.owner.token, "resp_nonsense"),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            await root_client(mesh, token).responses.retrieve(response_id)
        assert (missing.value.type, missing.value.code) == ("invalid_request_error", "response_not_found")
    # On an agent's own route, only that agent's responses.
    project = {"id": agent.project_id, "slug": agent.project_slug}
    sibling = await api.agent(agent.owner, name="sibling", mock_responses=[ANSWER], project=project)
    with pytest.raises(openai.NotFoundError):
        await agent_client(mesh, sibling.base, agent.owner.token).responses.retrieve(created.id)

    # Continued, it is no longer its session's only turn: not deleted (test_openai_response_delete.py).
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.delete(created.id)
    assert refused.value.code == "response_not_deletable"


async def test_a_run_waiting_for_the_clients_tools_reads_as_its_calls(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)
    stream = await client.responses.create(
        model=agent.model, input="Weather in Paris?", tools=[RESPONSES_WEATHER], stream=True
    )
    events = [event async for event in stream]
    # Only the items that have content: the calls, no empty message before them.
    added = [event for event in events if event.type == "response.output_item.added"]
    assert [(event.item.type, event.output_index) for event in added] == [("function_call", 0)]
    done = events[-1].response
    read = await client.responses.retrieve(done.id)
    assert [item.type for item in read.output] == ["function_call"]
    assert read.model_dump(include={"status", "output"}) == done.model_dump(include={"status", "output"})

    [call] = read.output
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}  # type: ignore[union-attr]
    answered = await client.responses.create(
        model=agent.model, previous_response_id=read.id, input=[output], tools=[RESPONSES_WEATHER]
    )
    # The run answered the same response id: read back, it is the answer now.
    assert (await client.responses.retrieve(read.id)).output_text == answered.output_text


async def test_a_running_response_reads_in_progress_and_cancelled_once_its_client_left(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    client = root_client(mesh, agent.owner.token)
    response_id, stream = await started_slowly(client, agent)
    created = await client.responses.retrieve(response_id)
    assert (created.status, created.output) == ("in_progress", [])

    await stream.close()  # the client goes away: its run is cancelled

    async def cancelled() -> bool:
        return (await client.responses.retrieve(created.id)).status == "cancelled"

    await eventually(cancelled, what="the response reads cancelled")
    read = await client.responses.retrieve(created.id)
    assert read.error is not None and read.error.message.startswith("the run was cancelled")
