"""Driving the gateway's HTTP face in tests: sign-ins, seeding through the REST API, waiting."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD

PASSWORD = "a-long-password-1"


@dataclass
class User:
    email: str
    token: str
    refresh_token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class Agent:
    """An agent seeded through REST: its project and the token of its owner."""

    project_id: str
    project_slug: str
    id: str
    name: str
    owner: User

    @property
    def model(self) -> str:
        return f"{self.project_slug}/{self.name}"

    @property
    def base(self) -> str:
        return f"/agents/{self.project_slug}/{self.name}"

    @property
    def path(self) -> str:
        return f"/api/v1/projects/{self.project_id}/agents/{self.id}"


def suffix() -> str:
    return uuid.uuid4().hex[:8]


class Api:
    """The gateway's REST API, for seeding and asserting in tests."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self._admin: User | None = None

    async def login(self, email: str, password: str) -> User:
        response = await self.http.post("/api/v1/auth/login", json={"email": email, "password": password})
        assert response.status_code == 200, response.text
        body = response.json()
        return User(email, body["access_token"], body["refresh_token"])

    async def admin(self) -> User:
        if self._admin is None:
            self._admin = await self.login(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)
        return self._admin

    async def user(self) -> User:
        email = f"user-{suffix()}@example.com"
        response = await self.http.post(
            "/api/v1/auth/register",
            json={"email": email, "password": PASSWORD, "first_name": "Test", "last_name": "User"},
        )
        assert response.status_code == 201, response.text
        return await self.login(email, PASSWORD)

    async def agent_type(self, **fields: Any) -> dict[str, Any]:
        name = f"type-{suffix()}"
        body = {
            "name": name,
            "slug": name,
            "description": "a test agent",
            "personality_prompt": "You are a test agent.",
            "primary_model": "mock",
            "max_steps": 5,
            **fields,
        }
        response = await self.http.post(
            "/api/v1/agent-types", json=body, headers=(await self.admin()).headers
        )
        assert response.status_code == 201, response.text
        return response.json()

    async def project(self, owner: User) -> dict[str, Any]:
        slug = f"p-{suffix()}"
        response = await self.http.post(
            "/api/v1/projects", json={"name": f"project {slug}", "slug": slug}, headers=owner.headers
        )
        assert response.status_code == 201, response.text
        return response.json()

    async def agent(
        self,
        owner: User | None = None,
        *,
        name: str = "assistant",
        mock_responses: Sequence[Any] | None = None,
        project: dict[str, Any] | None = None,
        type_fields: dict[str, Any] | None = None,
        **config: Any,
    ) -> Agent:
        """Spawns an agent of a fresh type into a project (a new one unless given)."""
        owner = owner or await self.user()
        agent_type = await self.agent_type(**(type_fields or {}))
        project = project or await self.project(owner)
        if mock_responses is not None:
            config["mock_responses"] = list(mock_responses)
        response = await self.http.post(
            f"/api/v1/projects/{project['id']}/agents",
            json={"agent_type_id": agent_type["id"], "name": name, "config": config},
            headers=owner.headers,
        )
        assert response.status_code == 201, response.text
        body = response.json()
        return Agent(project["id"], project["slug"], body["id"], body["name"], owner)

    async def status(self, agent: Agent) -> str:
        response = await self.http.get(agent.path, headers=agent.owner.headers)
        assert response.status_code == 200, response.text
        return response.json()["status"]

    async def session_events(self, agent: Agent, session_id: str) -> list[dict[str, Any]]:
        response = await self.http.get(
            f"/api/v1/projects/{agent.project_id}/sessions/{session_id}/events",
            params={"page_size": 1000},
            headers=agent.owner.headers,
        )
        assert response.status_code == 200, response.text
        return response.json()["events"]


async def a2a_jsonrpc(http: httpx.AsyncClient, agent: Agent, method: str, text: str = "hi") -> httpx.Response:
    """The agent's A2A JSON-RPC binding asked `method` (`SendMessage`, `SendStreamingMessage`)
    with one user message, as its owner."""
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {"message": {"messageId": f"m-{suffix()}", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    headers = {**agent.owner.headers, "A2A-Version": "1.0"}
    return await http.post(f"{agent.base}/a2a/jsonrpc", json=rpc, headers=headers)


def asks(question: str) -> dict[str, Any]:
    """A mock response that calls the built-in `ask_user`: the run suspends for an answer."""
    return {"content": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": question}}]}


async def asking_agent(api: Api, question: str, *then: Any) -> Agent:
    """An agent that may ask a person (`ask_user`): it asks `question`, then answers `then`."""
    return await api.agent(mock_responses=[asks(question), *then], type_fields={"tools": ["ask_user"]})


def sse_blocks(raw: str) -> list[dict[str, str]]:
    """Server-sent events as their fields (`id`, `event`, `data`), one dict an event."""
    blocks = []
    for block in raw.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields:
            blocks.append(fields)
    return blocks


def sse_text(blocks: list[dict[str, str]]) -> str:
    """The content an OpenAI-compatible stream's chunks add up to."""
    payloads = [json.loads(b["data"]) for b in blocks if b.get("data", "[DONE]") != "[DONE]"]
    return "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads if p["choices"])
