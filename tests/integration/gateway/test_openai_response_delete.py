"""Deleting a response (`client.responses.delete` of the official `openai` client), at the root and
on the agent's own route, on both databases (the run's events are erased from the session's log):
a response that ended and is its session's only turn is deleted — OpenAI's
`{"id", "object": "response", "deleted": true}` — and reading it, continuing it, listing its input
and deleting it again are 404s (a 400 `previous_response_not_found` to continue) from then on; one
in progress, one waiting for the client's tools and one whose session holds other turns are 400s
that leave it as it was; another project's, another agent's and an unknown one are 404s."""

from __future__ import annotations

import httpx
import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import ANSWER, agent_client, root_client
from tests.integration.gateway.test_openai_client_tools import RESPONSES_WEATHER, weather_agent
from tests.integration.gateway.test_openai_response_actions import _stranger
from tests.integration.gateway.test_openai_response_reads import started_slowly
from tests.integration.gateway.test_terminate import SLOW


@pytest.mark.parametrize("route", ["root", "agent"])
async def test_an_ended_response_is_deleted_and_is_gone_from_then_on(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, route: str
) -> None:
    agent = await api.agent(mock_responses=[ANSWER] * 4)
    client = root_client(mesh, agent.owner.token)
    actions = client if route == "root" else agent_client(mesh, agent.base, agent.owner.token)
    created = await client.responses.create(model=agent.model, input="What is the answer?")
    kept = await client.responses.create(model=agent.model, input="And another?")

    # Another project's key, and another agent of the project, find nothing to delete.
    with pytest.raises(openai.NotFoundError):
        await root_client(mesh, await _stranger(api)).responses.delete(created.id)
    project = {"id": agent.project_id, "slug": agent.project_slug}
    sibling = await api.agent(agent.owner, name="sibling", mock_responses=[ANSWER], project=project)
    with pytest.raises(openai.NotFoundError):
        await agent_client(mesh, sibling.base, agent.owner.token).responses.delete(created.id)
    assert (await client.responses.retrieve(created.id)).status == "completed"

    assert await actions.responses.delete(created.id) is None  # the client reads no body

    with pytest.raises(openai.NotFoundError) as gone:
        await client.responses.retrieve(created.id)
    assert gone.value.code == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        await actions.responses.input_items.list(created.id)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.create(model=agent.model, input="Go on", previous_response_id=created.id)
    assert refused.value.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        await actions.responses.delete(created.id)
    # Only that response went: the other, in its own session, reads as it did.
    assert (await client.responses.retrieve(kept.id)).output_text == ANSWER

    # OpenAI's answer to the delete, as other clients read it.
    path = "/v1/responses" if route == "root" else f"{agent.base}/v1/responses"
    deleted = await http.delete(f"{path}/{kept.id}", headers=agent.owner.headers)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"id": kept.id, "object": "response", "deleted": True}


async def test_a_continued_response_a_running_one_and_a_waiting_one_are_not_deleted(
    mesh: Mesh, api: Api
) -> None:
    agent = await api.agent(mock_responses=[ANSWER, ANSWER])
    client = root_client(mesh, agent.owner.token)
    first = await client.responses.create(model=agent.model, input="What is the answer?")
    second = await client.responses.create(model=agent.model, input="Sure?", previous_response_id=first.id)
    # Either turn of a conversation would leave the other with a hole in its log.
    for response_id in (first.id, second.id):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.delete(response_id)
        assert (refused.value.type, refused.value.code) == ("invalid_request_error", "response_not_deletable")
        assert "other turns" in refused.value.message
        assert (await client.responses.retrieve(response_id)).status == "completed"

    # In progress: cancel it first; cancelled, it is deleted.
    slow = await api.agent(agent.owner, name="slow", mock_responses=[SLOW, ANSWER])
    running, stream = await started_slowly(client, slow)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.delete(running)
    assert "cancel it first" in refused.value.message
    assert (await client.responses.cancel(running)).status == "cancelled"
    [_ async for _ in stream]
    await client.responses.delete(running)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(running)

    # Waiting for the client's tool results: its run goes on with them, so it stays.
    weather = await weather_agent(api)
    tools = root_client(mesh, weather.owner.token)
    waiting = await tools.responses.create(model=weather.model, input="Weather?", tools=[RESPONSES_WEATHER])
    with pytest.raises(openai.BadRequestError) as refused:
        await tools.responses.delete(waiting.id)
    assert "waits for input" in refused.value.message
    assert [call.type for call in (await tools.responses.retrieve(waiting.id)).output] == ["function_call"]


async def test_an_unknown_response_is_a_404_in_openais_shape(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=[ANSWER])
    made_up = f"resp_{'0' * 32}_no-such-session"
    for response_id in (made_up, "not-a-response-id"):
        with pytest.raises(openai.NotFoundError):
            await root_client(mesh, agent.owner.token).responses.delete(response_id)
        answer = await http.delete(f"{agent.base}/v1/responses/{response_id}", headers=agent.owner.headers)
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "response_not_found")
        assert response_id in error["message"]
