"""Cancelling a response and listing its input items (`client.responses.cancel`,
`client.responses.input_items.list` of the official `openai` client), at the root and on the
agent's own route: a response in progress is cancelled through its run, one that ended is a 400;
the input items are the run's input and the client's tool results, paged as OpenAI pages them;
another project's response is a 404."""

from __future__ import annotations

import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_api_keys import create_key
from tests.integration.gateway.test_disconnect import SLOW
from tests.integration.gateway.test_openai import ANSWER, agent_client, root_client
from tests.integration.gateway.test_openai_client_tools import RESPONSES_WEATHER, weather_agent
from tests.integration.gateway.test_openai_response_reads import started_slowly


async def _stranger(api: Api) -> str:
    """An API key of another project."""
    elsewhere = await api.agent(mock_responses=[ANSWER])
    return (await create_key(api.http, elsewhere.owner, project_id=elsewhere.project_id))["key"]


@pytest.mark.parametrize("route", ["root", "agent"])
async def test_a_response_in_progress_is_cancelled_and_an_ended_one_is_a_400(
    mesh: Mesh, api: Api, route: str, once: None
) -> None:
    agent = await api.agent(mock_responses=[SLOW, ANSWER])
    client = root_client(mesh, agent.owner.token)
    actions = client if route == "root" else agent_client(mesh, agent.base, agent.owner.token)
    response_id, stream = await started_slowly(client, agent)

    # Another project's key finds nothing to cancel.
    with pytest.raises(openai.NotFoundError):
        await root_client(mesh, await _stranger(api)).responses.cancel(response_id)

    cancelled = await actions.responses.cancel(response_id)
    assert (cancelled.id, cancelled.status) == (response_id, "cancelled")
    assert cancelled.error is not None and "cancelled" in cancelled.error.message
    # Its stream ends with the run: failed, as a run cancelled mid-answer ends on OpenAI's stream.
    rest = [event.type async for event in stream]
    assert rest[-1] == "response.failed"
    assert (await client.responses.retrieve(response_id)).status == "cancelled"
    # Cancelling it again answers it as it is.
    assert (await actions.responses.cancel(response_id)).status == "cancelled"

    answered = await client.responses.create(model=agent.model, input="And now?")
    with pytest.raises(openai.BadRequestError) as refused:
        await actions.responses.cancel(answered.id)
    assert (refused.value.type, refused.value.code) == ("invalid_request_error", "response_not_cancellable")
    assert "completed" in refused.value.message
    assert (await client.responses.retrieve(answered.id)).status == "completed"


async def test_a_waiting_response_is_not_cancelled_and_its_input_items_are_its_input_and_tool_results(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)
    waiting = await client.responses.create(
        model=agent.model, input="Weather in Paris?", tools=[RESPONSES_WEATHER]
    )
    # Waiting for the client's tools it reads completed, as the create call answered: not cancelled.
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.cancel(waiting.id)
    assert "function_call_output" in refused.value.message
    [call] = waiting.output
    items = [item async for item in client.responses.input_items.list(waiting.id)]
    assert [(item.type, item.content[0].text) for item in items] == [("message", "Weather in Paris?")]  # type: ignore[union-attr]

    output = {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}  # type: ignore[union-attr]
    await client.responses.create(
        model=agent.model, previous_response_id=waiting.id, input=[output], tools=[RESPONSES_WEATHER]
    )
    # Newest first by default; oldest first asked; one at a time, the client follows the pages.
    newest = [item async for item in client.responses.input_items.list(waiting.id)]
    assert [item.type for item in newest] == ["function_call_output", "message"]
    assert (newest[0].call_id, newest[0].output) == (call.call_id, "18C")  # type: ignore[union-attr]
    on_agent = agent_client(mesh, agent.base, agent.owner.token)
    oldest = [item async for item in on_agent.responses.input_items.list(waiting.id, order="asc", limit=1)]
    assert [item.id for item in oldest] == [item.id for item in reversed(newest)]
    first = await client.responses.input_items.list(waiting.id, limit=1)
    assert first.has_more and first.last_id == newest[0].id  # type: ignore[attr-defined]

    # Another project's key, and another agent's route, find nothing; bad paging is a 400.
    with pytest.raises(openai.NotFoundError):
        await root_client(mesh, await _stranger(api)).responses.input_items.list(waiting.id)
    project = {"id": agent.project_id, "slug": agent.project_slug}
    sibling = await api.agent(agent.owner, name="sibling", mock_responses=[ANSWER], project=project)
    with pytest.raises(openai.NotFoundError):
        await agent_client(mesh, sibling.base, agent.owner.token).responses.input_items.list(waiting.id)
    for paging, field in (({"limit": 0}, "limit"), ({"after": "msg_nothing"}, "after")):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.input_items.list(waiting.id, **paging)  # type: ignore[arg-type]
        assert refused.value.param == field
