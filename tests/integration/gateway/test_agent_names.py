"""Agents named as people write them: the REST routes, the agent runtime
endpoints, the OpenAI model id and delegation all take an agent's slug and its exact name; REST,
cards, health and events show both."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from openai import AsyncOpenAI

from tests.integration.gateway.support import Api, User, suffix


async def _spawn(
    http: httpx.AsyncClient, api: Api, owner: User, project: dict[str, Any], name: str, **config: Any
) -> dict[str, Any]:
    agent_type = await api.agent_type()
    response = await http.post(
        f"/api/v1/projects/{project['id']}/agents",
        json={"agent_type_id": agent_type["id"], "name": name, "config": config},
        headers=owner.headers,
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_rest_routes_take_the_id_the_slug_or_the_exact_name(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    project = await api.project(owner)
    agent = await _spawn(http, api, owner, project, "My PO Agent")
    assert (agent["name"], agent["slug"]) == ("My PO Agent", "my-po-agent")
    base = f"/api/v1/projects/{project['id']}/agents"
    for ref in (agent["id"], "my-po-agent", quote("My PO Agent")):
        got = await http.get(f"{base}/{ref}", headers=owner.headers)
        assert got.status_code == 200, ref
        assert got.json()["id"] == agent["id"]
        metrics = await http.get(f"{base}/{ref}/metrics", headers=owner.headers)
        assert metrics.status_code == 200, ref
    unknown = await http.get(f"{base}/{quote('my po agent')}", headers=owner.headers)
    assert unknown.status_code == 404
    paused = await http.post(f"{base}/{quote('My PO Agent')}/pause", headers=owner.headers)
    assert paused.json()["status"] == "paused"
    resumed = await http.post(f"{base}/my-po-agent/resume", headers=owner.headers)
    assert resumed.json()["status"] == "idle"
    terminated = await http.delete(f"{base}/{quote('My PO Agent')}", headers=owner.headers)
    assert terminated.status_code == 200
    assert (await http.get(f"{base}/{agent['id']}", headers=owner.headers)).json()["status"] == "terminated"
    again = await http.post(f"{base}/my-po-agent/resume", headers=owner.headers)
    assert again.status_code == 400


async def test_agent_endpoints_and_models_take_the_slug_or_the_name(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    await _spawn(http, api, owner, project, "Answer Bot", mock_responses=["forty-two"])
    for ref in ("answer-bot", quote("Answer Bot")):
        base = f"/agents/{project['slug']}/{ref}"
        health = await http.get(f"{base}/health", headers=owner.headers)
        assert health.json() == {"status": "healthy", "name": "Answer Bot", "slug": "answer-bot"}
        card = (await http.get(f"{base}/.well-known/agent", headers=owner.headers)).json()
        assert (card["name"], card["slug"]) == ("Answer Bot", "answer-bot")
        assert card["url"].endswith(f"/agents/{project['slug']}/answer-bot")

    openai = AsyncOpenAI(base_url=f"{str(http.base_url).rstrip('/')}/v1", api_key=owner.token, max_retries=0)
    async with openai:
        for model in (f"{project['slug']}/Answer Bot", f"{project['slug']}/answer-bot"):
            reply = await openai.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "the question"}]
            )
            assert reply.choices[0].message.content == "forty-two", model
        listed = {model.id async for model in openai.models.list()}
    assert f"{project['slug']}/answer-bot" in listed


async def test_a_delegation_may_name_its_target_by_name_and_events_show_both(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    await _spawn(http, api, owner, project, "My Worker", mock_responses=["worked"])
    delegate = '```delegate\n{"agent": "My Worker", "task": "do it"}\n```'
    await _spawn(
        http,
        api,
        owner,
        project,
        "The Boss",
        network_access=["My Worker"],
        mock_responses=[delegate, "all done"],
    )
    card = (
        await http.get(f"/agents/{project['slug']}/the-boss/.well-known/agent", headers=owner.headers)
    ).json()
    assert "task_delegation" in card["capabilities"]
    session_id = f"names-{suffix()}"
    reply = await http.post(
        f"/agents/{project['slug']}/{quote('The Boss')}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "go"}], "session_id": session_id},
        headers=owner.headers,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "all done"
    listed = await http.get(
        f"/api/v1/projects/{project['id']}/sessions/{session_id}/events",
        params={"page_size": 1000},
        headers=owner.headers,
    )
    events = listed.json()["events"]
    by_type = {(e["agent"], e["event_type"]): e for e in events}
    request = by_type[("the-boss", "delegation_request")]
    assert '"agent": "my-worker"' in request["content"]
    received = by_type[("my-worker", "task_delegation_received")]
    assert received["metadata"]["agent_name"] == "My Worker"
    assert by_type[("the-boss", "delegation_response")]["metadata"]["outcome"] == "completed"
    assert {e["metadata"]["agent_name"] for e in events if e["agent"] == "the-boss"} == {"The Boss"}
    worker_events = await http.get(
        f"/agents/{project['slug']}/{quote('My Worker')}/memory/events",
        params={"session_id": session_id},
        headers=owner.headers,
    )
    assert {e["agent"] for e in worker_events.json()["events"]} == {"my-worker"}
