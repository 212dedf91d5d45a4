"""Agent runtime endpoints under `/agents/{project_slug}/{agent_name}`: health, cards, memory."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import Api


async def test_health_follows_the_lifecycle(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent()
    health = await http.get(f"{agent.base}/health", headers=agent.owner.headers)
    assert health.json() == {"status": "healthy", "name": agent.name, "slug": agent.name}
    await http.post(f"{agent.path}/pause", headers=agent.owner.headers)
    assert (await http.get(f"{agent.base}/health", headers=agent.owner.headers)).json()["status"] == "paused"
    assert (await http.get(f"{agent.base}/health")).status_code == 401


async def test_cards_claim_task_delegation_exactly_when_the_agent_may_delegate(
    http: httpx.AsyncClient, api: Api
) -> None:
    owner = await api.user()
    worker = await api.agent(owner, name="worker", type_fields={"expertise": ["number crunching"]})
    project = {"id": worker.project_id, "slug": worker.project_slug}
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project=project,
        network_access=["worker"],
        type_fields={"tools": ["exit_loop"]},
    )

    card = (await http.get(f"{worker.base}/.well-known/agent", headers=owner.headers)).json()
    assert set(card) == {"name", "slug", "description", "url", "version", "capabilities", "skills"}
    assert card["name"] == "worker"
    assert card["url"].endswith(worker.base)
    assert card["capabilities"] == ["streaming"]
    assert card["skills"] == ["number crunching"]

    card = (await http.get(f"{coordinator.base}/.well-known/agent", headers=owner.headers)).json()
    assert set(card["capabilities"]) == {"streaming", "tool_calling", "task_delegation"}

    a2a = (await http.get(f"{coordinator.base}/.well-known/agent-card.json", headers=owner.headers)).json()
    assert a2a["name"] == "coordinator"
    assert a2a["capabilities"]["streaming"] is True
    # A2A v1.0: each binding's URL in supportedInterfaces (test_a2a_bindings.py talks to them).
    interfaces = {i["protocolBinding"]: i for i in a2a["supportedInterfaces"]}
    assert interfaces["JSONRPC"]["url"].endswith(f"{coordinator.base}/a2a/jsonrpc")
    assert interfaces["HTTP+JSON"]["url"].endswith(f"{coordinator.base}/a2a/rest")
    assert interfaces["GRPC"]["tenant"] == coordinator.model
    assert {i["protocolVersion"] for i in interfaces.values()} == {"1.0"}
    assert {
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
        "securitySchemes",
        "securityRequirements",
    } <= set(a2a)
    assert a2a["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    # What it may delegate is for a caller it serves: on the extended card, not the public one.
    assert "task_delegation" not in [skill["id"] for skill in a2a["skills"]]
    extended = await http.post(
        f"{coordinator.base}/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}},
        headers={**owner.headers, "A2A-Version": "1.0"},
    )
    assert "task_delegation" in [skill["id"] for skill in extended.json()["result"]["skills"]], extended.text


async def test_memory_events_filter_and_page(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=["noted"])
    url = f"{agent.base}/v1/chat/completions"
    for session in ("mem-a", "mem-a", "mem-b"):
        response = await http.post(
            url,
            json={"messages": [{"role": "user", "content": f"in {session}"}]},
            headers={**agent.owner.headers, "X-Session-Id": f"{session}-{agent.id[:8]}"},
        )
        assert response.status_code == 200, response.text

    events_url = f"{agent.base}/memory/events"
    everything = (await http.get(events_url, headers=agent.owner.headers)).json()
    assert set(everything) == {"total", "events", "next_page_token", "byte_limit_reached"}
    assert everything["total"] == 6
    assert {e["agent"] for e in everything["events"]} == {agent.name}
    assert set(everything["events"][0]) == {
        "id",
        "session_id",
        "seq",
        "agent",
        "event_type",
        "content",
        "metadata",
        "run_id",
        "parent_event_id",
        "delegation_id",
        "trace_id",
        "span_id",
        "created_at",
        "idempotency_key",
    }

    one_session = (
        await http.get(
            events_url, params={"session_id": f"mem-a-{agent.id[:8]}"}, headers=agent.owner.headers
        )
    ).json()
    assert one_session["total"] == 4
    assert [e["seq"] for e in one_session["events"]] == [1, 2, 3, 4]

    answers = (
        await http.get(events_url, params={"event_type": "agent_response"}, headers=agent.owner.headers)
    ).json()
    assert answers["total"] == 3
    assert {e["content"] for e in answers["events"]} == {"noted"}

    first = (await http.get(events_url, params={"page_size": 4}, headers=agent.owner.headers)).json()
    assert len(first["events"]) == 4 and first["next_page_token"]
    rest = (
        await http.get(
            events_url,
            params={"page_size": 4, "page_token": first["next_page_token"]},
            headers=agent.owner.headers,
        )
    ).json()
    assert len(rest["events"]) == 2 and not rest["next_page_token"]

    bad_type = await http.get(events_url, params={"event_type": "gossip"}, headers=agent.owner.headers)
    assert bad_type.status_code == 422
    other_project = await api.agent(agent.owner)
    foreign = await http.get(
        f"{other_project.base}/memory/events",
        params={"session_id": f"mem-a-{agent.id[:8]}"},
        headers=agent.owner.headers,
    )
    assert foreign.status_code == 404


async def test_project_sessions_and_their_events(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=["fine"])
    for session in ("old", "new"):
        await http.post(
            f"{agent.base}/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "hello"}],
                "session_id": f"{session}-{agent.id[:6]}",
            },
            headers=agent.owner.headers,
        )
    listed = await http.get(f"/api/v1/projects/{agent.project_id}/sessions", headers=agent.owner.headers)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [s["id"] for s in body["data"]] == [f"new-{agent.id[:6]}", f"old-{agent.id[:6]}"]  # newest first
    assert body["pagination"]["total"] == 2
    second_page = await http.get(
        f"/api/v1/projects/{agent.project_id}/sessions",
        params={"page": 2, "page_size": 1},
        headers=agent.owner.headers,
    )
    assert [s["id"] for s in second_page.json()["data"]] == [f"old-{agent.id[:6]}"]

    events = await api.session_events(agent, f"old-{agent.id[:6]}")
    assert [(e["seq"], e["event_type"]) for e in events] == [(1, "user_message"), (2, "agent_response")]
