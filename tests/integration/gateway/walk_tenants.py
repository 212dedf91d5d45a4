"""The tenants the unknown-id walk (test_unknown_ids.py) asks as and about: a user with one of
each resource an id can name."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from tests.integration.gateway.support import Agent, Api, User, a2a_jsonrpc, asks
from tests.polling import eventually


@dataclass
class Tenant:
    """A user's resources, one of each kind an id can name."""

    user: User
    user_id: str
    agent: Agent
    agent_type_id: str
    session_id: str
    task_id: str
    remote_agent_id: str
    api_key_id: str
    request_id: str
    webhook_id: str
    schedule_id: str
    response_id: str
    mcp_server_id: str = ""

    def ids(self) -> dict[str, str]:
        """Each id by the names routes and requests give it."""
        own = {name: value for name, value in vars(self).items() if isinstance(value, str)}
        agent = self.agent
        return {
            **own,
            **{"project_id": agent.project_id, "project_slug": agent.project_slug, "agent_id": agent.id},
            **{"agent_name": agent.name, "tenant": agent.model, "context_id": self.session_id},
            **{"input_request_id": self.request_id, "number": "1"},
        }


async def make_tenant(api: Api, http: httpx.AsyncClient) -> Tenant:
    """A new user with one of each resource an id can name."""
    owner = await api.user()
    project = await api.project(owner)
    # Its name is not the other tenant's: the path names one agent.
    agent = await api.agent(
        owner, name=f"walker-{uuid.uuid4().hex[:6]}", project=project, mock_responses=["fine"]
    )
    asking = await api.agent(
        owner,
        name="asking",
        project=project,
        mock_responses=[asks("which one?")],
        type_fields={"tools": ["ask_user"]},
    )
    await a2a_jsonrpc(http, asking, "SendMessage")  # a request for input, waiting
    me = (await http.get("/api/v1/users/me", headers=owner.headers)).json()
    type_id = (await http.get(agent.path, headers=owner.headers)).json()["agent_type_id"]
    sent = (await a2a_jsonrpc(http, agent, "SendMessage")).json()["result"]["task"]
    path = f"/api/v1/projects/{agent.project_id}"

    requests: list[dict[str, Any]] = []

    async def asked() -> bool:
        listed = await http.get(f"{path}/input-requests", headers=owner.headers)
        requests[:] = listed.json()["data"] if listed.status_code == 200 else []
        return bool(requests)

    await eventually(asked, timeout=30, what="the agent's question")
    [request] = requests
    remote = await http.post(
        f"{path}/remote-agents",
        json={"name": "faraway", "card_url": "https://faraway.example/.well-known/agent-card.json"},
        headers=owner.headers,
    )
    key = await http.post(
        "/api/v1/api-keys", json={"name": "walk", "project_id": agent.project_id}, headers=owner.headers
    )
    hook = await http.post(
        f"{path}/webhooks",
        json={"url": "https://hooks.example/agentmesh", "events": ["run.completed"]},
        headers=owner.headers,
    )
    schedule = await http.post(
        f"{path}/schedules",
        json={"name": "nightly", "agent": agent.name, "message": "go", "cron": "0 3 * * *", "enabled": False},
        headers=owner.headers,
    )
    response = await http.post(
        "/v1/responses", json={"model": agent.model, "input": "hi"}, headers=owner.headers
    )
    made = (remote, key, hook, schedule)
    assert [answer.status_code for answer in made] == [201] * 4, [answer.text for answer in made]
    assert response.status_code == 200, response.text
    ids = (sent["contextId"], sent["id"], remote.json()["id"], key.json()["id"], request["id"])
    created = (hook.json()["id"], schedule.json()["id"], response.json()["id"])
    return Tenant(owner, me["id"], agent, type_id, *ids, *created)
