"""Fixtures for the port of the Kubernetes agent system's agentic-loop e2e suite.

What the original does with a cluster, this does with a whole agentmesh mesh running in this
process over real HTTP (one per module and database backend):

- `test_namespace` is a project of its own for each test, owned by the superuser, whose token the
  test's HTTP clients carry (the cluster's gateway needed none);
- `shared_modelapi` is the model the agents use: the scripted mock (DEBUG_MOCK_RESPONSES become
  the agent's `mock_responses`, which select it whatever MODEL_NAME says);
- `create_custom_resource` declares a kaos `Agent` resource as an agentmesh agent type and agent
  (REST); the waits poll the agent's `/health` until it answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from tests.mesh import BACKENDS, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, running_mesh
from tests.polling import eventually


@dataclass(frozen=True)
class Namespace:
    """A project standing in for a Kubernetes namespace: where agents are declared and reached."""

    id: str
    slug: str
    base_url: str
    headers: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def mesh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Mesh]:
    async with running_mesh(request, tmp_path_factory.mktemp("kaos")) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def test_namespace(mesh: Mesh) -> Namespace:
    base_url = mesh.gateway.http.url
    async with httpx.AsyncClient(base_url=base_url, timeout=DECLARE_TIMEOUT_SECONDS) as client:
        login = await client.post(
            "/api/v1/auth/login", json={"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD}
        )
        assert login.status_code == 200, login.text
        headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        slug = f"kaos-{uuid.uuid4().hex[:8]}"
        created = await client.post("/api/v1/projects", json={"name": slug, "slug": slug}, headers=headers)
        assert created.status_code == 201, created.text
    return Namespace(created.json()["id"], slug, base_url, headers)


@pytest.fixture
def shared_modelapi() -> str:
    return "mock"


# The in-process mesh shares its event loop with the test and three other suite workers share the
# host: a declaration is not a latency measurement, so its calls get the margin the module's other
# calls have (httpx's default is 5 s).
DECLARE_TIMEOUT_SECONDS = 30.0


async def create_custom_resource(resource: dict[str, Any], namespace: Namespace) -> None:
    """Declares a kaos `Agent` resource: an agent type with its description, instructions,
    model and step bound, and an agent of it with its mock responses and network access."""
    assert resource["kind"] == "Agent"
    spec, config = resource["spec"], resource["spec"]["config"]
    env = {item["name"]: item["value"] for item in config.get("env", [])}
    name = resource["metadata"]["name"]
    type_slug = f"{name}-{uuid.uuid4().hex[:6]}"
    agent_type = {
        "name": type_slug,
        "slug": type_slug,
        "description": config["description"],
        "personality_prompt": config["instructions"],
        "primary_model": env.get("MODEL_NAME") or spec["modelAPI"],
        "max_steps": config["reasoningLoopMaxSteps"],
    }
    agent_config: dict[str, Any] = {"network_access": list(spec.get("agentNetwork", {}).get("access", []))}
    if "DEBUG_MOCK_RESPONSES" in env:
        agent_config["mock_responses"] = json.loads(env["DEBUG_MOCK_RESPONSES"])
    async with httpx.AsyncClient(
        base_url=namespace.base_url, headers=namespace.headers, timeout=DECLARE_TIMEOUT_SECONDS
    ) as client:
        created_type = await client.post("/api/v1/agent-types", json=agent_type)
        assert created_type.status_code == 201, created_type.text
        created = await client.post(
            f"/api/v1/projects/{namespace.id}/agents",
            json={"agent_type_id": created_type.json()["id"], "name": name, "config": agent_config},
        )
        assert created.status_code == 201, created.text


def gateway_url(namespace: Namespace, kind: str, name: str) -> str:
    assert kind == "agent"
    return f"{namespace.base_url}/agents/{namespace.slug}/{name}"


async def async_wait_for_healthy(url: str, namespace: Namespace, timeout: float = 30.0) -> None:
    async with httpx.AsyncClient(headers=namespace.headers, timeout=DECLARE_TIMEOUT_SECONDS) as client:

        async def healthy() -> bool:
            return (await client.get(f"{url}/health")).status_code == 200

        await eventually(healthy, timeout=timeout, what=f"{url} is healthy")


async def wait_for_deployment(namespace: Namespace, deployment: str, timeout: float = 30.0) -> None:
    """The agent behind `agent-{name}` answers on its health endpoint."""
    name = deployment.removeprefix("agent-")
    await async_wait_for_healthy(gateway_url(namespace, "agent", name), namespace, timeout=timeout)


async def wait_for_resource_ready(url: str, namespace: Namespace) -> None:
    await async_wait_for_healthy(url, namespace)
