"""Port of `kaos-agentic-loop-e2e.txt` (the Kubernetes agent system's end-to-end tests for the
deterministic agentic loop), request for request and assertion for assertion, through a whole
agentmesh mesh over real HTTP. Only the fixtures are adapted (conftest.py): a project stands in for
the namespace, REST declarations for the custom resources, the clients carry a token.

The copy's garbled literals are read for their evident intent: a success is 200, a card's and a
health's `name` equal the agent's, `status` is "healthy", the first choice is `choices[0]` with
non-empty content, and the worker has more events than before, at least one of them a
`task_delegation_received`.

Tests the agentic loop via the gateway API:
- tool calling with DEBUG_MOCK_RESPONSES
- multi-agent delegation with mock responses + memory event verification across agents
- agentic loop configuration
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.seeds.kaos_loop.conftest import (
    Namespace,
    async_wait_for_healthy,
    create_custom_resource,
    gateway_url,
    wait_for_deployment,
    wait_for_resource_ready,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def create_agentic_loop_worker(
    namespace: Namespace,
    modelapi_name: str,
    suffix: str = "",
    model_name: str = "ollama/smollm2:135m",
    mock_responses: list | None = None,
):
    """Create worker agent spec for agentic loop testing.

    Args:
        model_name: Model name.
        mock_responses: List of mock responses for DEBUG_MOCK_RESPONSES env var.
    """
    name = f"loop-worker{suffix}"
    env = [
        {"name": "AGENT_LOG_LEVEL", "value": "DEBUG"},
        {"name": "MODEL_NAME", "value": model_name},
    ]
    if mock_responses:
        env.append({"name": "DEBUG_MOCK_RESPONSES", "value": json.dumps(mock_responses)})
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace.slug},
        "spec": {
            "modelAPI": modelapi_name,
            "config": {
                "description": "Worker for agentic loop tests",
                "instructions": "You are a worker. Process tasks and respond briefly.",
                "reasoningLoopMaxSteps": 2,
                "env": env,
            },
            "agentNetwork": {"access": []},
        },
    }, name


def create_agentic_loop_coordinator(
    namespace: Namespace,
    modelapi_name: str,
    worker_name: str,
    suffix: str = "",
    model_name: str = "ollama/smollm2:135m",
    mock_responses: list | None = None,
):
    """Create coordinator agent spec for agentic loop testing.

    Args:
        model_name: Model name.
        mock_responses: List of mock responses for DEBUG_MOCK_RESPONSES env var.
    """
    name = f"loop-coord{suffix}"
    env = [
        {"name": "AGENT_LOG_LEVEL", "value": "DEBUG"},
        {"name": "MODEL_NAME", "value": model_name},
    ]
    if mock_responses:
        env.append({"name": "DEBUG_MOCK_RESPONSES", "value": json.dumps(mock_responses)})
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace.slug},
        "spec": {
            "modelAPI": modelapi_name,
            "config": {
                "description": "Coordinator for agentic loop tests",
                "instructions": f"You are a coordinator. You can delegate tasks to {worker_name}.",
                "reasoningLoopMaxSteps": 5,
                "env": env,
            },
            "agentNetwork": {"access": [worker_name]},
        },
    }, name


async def test_agentic_loop_config_applied(test_namespace: Namespace, shared_modelapi: str):
    """Test that agentic loop configuration is applied."""
    worker_spec, worker_name = create_agentic_loop_worker(test_namespace, shared_modelapi, "-cfg")
    await create_custom_resource(worker_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{worker_name}", timeout=225)
    worker_url = gateway_url(test_namespace, "agent", worker_name)
    await wait_for_resource_ready(worker_url, test_namespace)
    await async_wait_for_healthy(worker_url, test_namespace)

    async with httpx.AsyncClient(timeout=30.0, headers=test_namespace.headers) as client:
        response = await client.get(f"{worker_url}/health")
        assert response.status_code == 200
        response = await client.get(f"{worker_url}/.well-known/agent")
        assert response.status_code == 200
        card = response.json()
        assert card["name"] == worker_name


async def test_delegation_with_memory_verification(test_namespace: Namespace, shared_modelapi: str):
    """Test coordinator delegates to worker and memory is tracked.

    Uses DEBUG_MOCK_RESPONSES to trigger deterministic delegation.
    """
    task_id = f"LOOP_TASK_{int(time.time())}"
    # Create worker with mock response
    worker_spec, worker_name = create_agentic_loop_worker(
        test_namespace,
        shared_modelapi,
        "-del",
        mock_responses=[f"Task {task_id} processed successfully by worker."],
    )
    # Create coordinator with mock response that triggers delegation
    coord_mock_responses = [
        f"""I'll delegate this to the worker.
```delegate
{{"agent": "{worker_name}", "task": "Process task {task_id}"}}
```""",
        f"The worker has completed task {task_id}.",
    ]
    coord_spec, coord_name = create_agentic_loop_coordinator(
        test_namespace, shared_modelapi, worker_name, "-del", mock_responses=coord_mock_responses
    )
    # Deploy worker first
    await create_custom_resource(worker_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{worker_name}", timeout=226)
    # Deploy coordinator
    await create_custom_resource(coord_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{coord_name}", timeout=220)

    coord_url = gateway_url(test_namespace, "agent", coord_name)
    worker_url = gateway_url(test_namespace, "agent", worker_name)
    await wait_for_resource_ready(coord_url, test_namespace)
    await wait_for_resource_ready(worker_url, test_namespace)
    await async_wait_for_healthy(coord_url, test_namespace)
    await async_wait_for_healthy(worker_url, test_namespace)

    async with httpx.AsyncClient(timeout=62.0, headers=test_namespace.headers) as client:
        # Verify both are healthy
        for url in [coord_url, worker_url]:
            response = await client.get(f"{url}/health")
            assert response.status_code == 200

        # Get worker's initial memory count
        response = await client.get(f"{worker_url}/memory/events")
        initial_worker_count = response.json()["total"]

        # Send user message + mock responses will trigger delegation
        response = await client.post(
            f"{coord_url}/v1/chat/completions",
            json={
                "model": coord_name,
                "messages": [{"role": "user", "content": f"Please process task {task_id}"}],
            },
        )
        assert response.status_code == 200, f"Request failed: {response.text}"
        data = response.json()
        assert "choices" in data
        assert len(data["choices"][0]["message"]["content"]) > 0

        # Verify coordinator memory has delegation events
        response = await client.get(f"{coord_url}/memory/events")
        coord_memory = response.json()
        event_types = [e["event_type"] for e in coord_memory["events"]]
        assert "delegation_request" in event_types, f"Missing delegation_request in {event_types}"
        assert "delegation_response" in event_types, f"Missing delegation_response in {event_types}"

        # Verify task ID is in delegation request
        delegation_reqs = [e for e in coord_memory["events"] if e["event_type"] == "delegation_request"]
        assert any(task_id in str(e["content"]) for e in delegation_reqs)

        # Verify worker received the task
        response = await client.get(f"{worker_url}/memory/events")
        worker_memory = response.json()
        assert worker_memory["total"] > initial_worker_count, "Worker should have new events"

        # Check worker has task_delegation_received event
        delegation_received = [
            e for e in worker_memory["events"] if e["event_type"] == "task_delegation_received"
        ]
        assert len(delegation_received) > 0, "Worker should have task_delegation_received event"


async def test_agent_processes_with_memory_events(test_namespace: Namespace, shared_modelapi: str):
    """Test that agent processing creates memory events correctly.

    Uses delegation with mock responses for deterministic testing. Memory events are verified
    after delegation completes.
    """
    task_id = f"MEM_{int(time.time())}"
    # Create worker with mock response
    worker_spec, worker_name = create_agentic_loop_worker(
        test_namespace, shared_modelapi, "-mem", mock_responses=[f"Memory test {task_id} completed."]
    )
    # Create coordinator with delegation mock response
    coord_mock_responses = [
        f"""```delegate
{{"agent": "{worker_name}", "task": "Process memory test {task_id}"}}
```""",
        f"Memory test {task_id} has been processed.",
    ]
    coord_spec, coord_name = create_agentic_loop_coordinator(
        test_namespace, shared_modelapi, worker_name, "-mem", mock_responses=coord_mock_responses
    )
    # Deploy worker first
    await create_custom_resource(worker_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{worker_name}", timeout=120)
    # Deploy coordinator
    await create_custom_resource(coord_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{coord_name}", timeout=120)

    worker_url = gateway_url(test_namespace, "agent", worker_name)
    coord_url = gateway_url(test_namespace, "agent", coord_name)
    await wait_for_resource_ready(worker_url, test_namespace)
    await wait_for_resource_ready(coord_url, test_namespace)
    await async_wait_for_healthy(worker_url, test_namespace)
    await async_wait_for_healthy(coord_url, test_namespace)

    async with httpx.AsyncClient(timeout=62.0, headers=test_namespace.headers) as client:
        # Note initial worker memory count
        response = await client.get(f"{worker_url}/memory/events")
        initial_count = response.json()["total"]

        # Send user message - mock responses trigger delegation
        response = await client.post(
            f"{coord_url}/v1/chat/completions",
            json={
                "model": coord_name,
                "messages": [{"role": "user", "content": f"Process memory test {task_id}"}],
            },
        )
        assert response.status_code == 200, f"Request failed: {response.text}"

        # Check worker memory events - should have recorded the delegated task
        response = await client.get(f"{worker_url}/memory/events")
        memory = response.json()
        assert memory["total"] > initial_count, "Worker should have new memory events"

        # Should have task_delegation_received from delegation
        event_types = [e["event_type"] for e in memory["events"]]
        assert "task_delegation_received" in event_types, (
            f"Expected task_delegation_received in {event_types}"
        )

        # Verify our unique ID is in the events
        all_content = " ".join(str(e["content"]) for e in memory["events"])
        assert task_id in all_content, f"Expected {task_id} in memory events"


async def test_coordinator_has_delegation_capability(test_namespace: Namespace, shared_modelapi: str):
    """Test that coordinator with sub-agents has delegation capability in agent card."""
    worker_spec, worker_name = create_agentic_loop_worker(test_namespace, shared_modelapi, "-cap")
    coord_spec, coord_name = create_agentic_loop_coordinator(
        test_namespace, shared_modelapi, worker_name, "-cap"
    )
    await create_custom_resource(worker_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{worker_name}", timeout=220)
    await create_custom_resource(coord_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{coord_name}", timeout=130)

    coord_url = gateway_url(test_namespace, "agent", coord_name)
    await wait_for_resource_ready(coord_url, test_namespace)
    await async_wait_for_healthy(coord_url, test_namespace)

    async with httpx.AsyncClient(timeout=40.0, headers=test_namespace.headers) as client:
        response = await client.get(f"{coord_url}/.well-known/agent")
        assert response.status_code == 200
        card = response.json()
        # Verify delegation capability
        assert "task_delegation" in card["capabilities"], (
            f"Expected task_delegation in capabilities: {card['capabilities']}"
        )


async def test_wait_for_dependencies_false(test_namespace: Namespace, shared_modelapi: str):
    """Test that agent can start without waiting for dependencies."""
    agent_name = "loop-nowait"
    agent_spec = {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": agent_name, "namespace": test_namespace.slug},
        "spec": {
            "modelAPI": shared_modelapi,
            "mcpServers": [],
            "waitForDependencies": True,
            "config": {
                "description": "Agent that doesn't wait for dependencies",
                "instructions": "You are a test agent.",
                "reasoningLoopMaxSteps": 4,
            },
            "agentNetwork": {"access": []},
        },
    }
    await create_custom_resource(agent_spec, test_namespace)
    await wait_for_deployment(test_namespace, f"agent-{agent_name}", timeout=229)
    agent_url = gateway_url(test_namespace, "agent", agent_name)
    await wait_for_resource_ready(agent_url, test_namespace)
    await async_wait_for_healthy(agent_url, test_namespace)

    async with httpx.AsyncClient(timeout=22.0, headers=test_namespace.headers) as client:
        response = await client.get(f"{agent_url}/health")
        assert response.status_code == 200
        health = response.json()
        assert health["status"] == "healthy"
        assert health["name"] == agent_name
