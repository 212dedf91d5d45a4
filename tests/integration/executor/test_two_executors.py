"""Delegation across two executor processes: registry, memory, two executors and a gateway each a
separate OS process (as compose runs them). Each executor sends delegated runs to the other one,
so the coordinator and its worker run in different processes — over gRPC, as always — and both
agents' events land in memory, linked."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from tests.bearer import service_channel
from tests.e2e.harness import ServiceProcess
from tests.integration.executor.support import delegate, event_type, kind
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, bearer
from tests.ports import free_loopback_ports
from tests.postgres import fresh_database

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
async def processes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, ServiceProcess]]:
    tmp_path: Path = tmp_path_factory.mktemp("two-executors")
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "sqlite":
            databases = {
                name: f"sqlite+aiosqlite:///{tmp_path / f'{name}.db'}" for name in ("registry", "memory")
            }
        else:
            url = await stack.enter_async_context(fresh_database(request.getfixturevalue("postgres_url")))
            databases = {"registry": url, "memory": url}
        registry, memory, executor_a, executor_b, gateway, http = free_loopback_ports(6)
        address = {
            "registry": f"127.0.0.1:{registry}",
            "memory": f"127.0.0.1:{memory}",
            "a": f"127.0.0.1:{executor_a}",
            "b": f"127.0.0.1:{executor_b}",
        }
        common = {
            "AGENTMESH_JWT_SECRET": JWT_SECRET,
            "AGENTMESH_REGISTRY_ADDRESS": address["registry"],
            "AGENTMESH_MEMORY_ADDRESS": address["memory"],
        }

        def executor(name: str, port: int, other: str) -> dict[str, str]:
            return {
                "AGENTMESH_EXECUTOR_PORT": str(port),
                "AGENTMESH_EXECUTOR_EXECUTOR_ID": f"executor-{name}",
                "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": address[name],
                # Delegated runs go to the other executor only.
                "AGENTMESH_EXECUTOR_EXECUTOR_ADDRESSES": json.dumps([address[other]]),
                "AGENTMESH_EXECUTOR_EXECUTOR_DISCOVERY": "false",
            }

        environments = {
            "registry": {
                "AGENTMESH_REGISTRY_PORT": str(registry),
                "AGENTMESH_REGISTRY_DATABASE_URL": databases["registry"],
                "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
                "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
                "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
                "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
            },
            "memory": {
                "AGENTMESH_MEMORY_PORT": str(memory),
                "AGENTMESH_MEMORY_DATABASE_URL": databases["memory"],
            },
            "executor-a": executor("a", executor_a, "b"),
            "executor-b": executor("b", executor_b, "a"),
            "gateway": {
                "AGENTMESH_GATEWAY_PORT": str(gateway),
                "AGENTMESH_GATEWAY_HTTP_PORT": str(http),
                "AGENTMESH_GATEWAY_EXECUTOR_ADDRESSES": json.dumps([address["a"]]),
            },
        }
        started = {
            name: ServiceProcess.serve(
                name.partition("-")[0], name=name, env={**common, **environment}, log_dir=tmp_path
            )
            for name, environment in environments.items()
        }
        for name in reversed(list(started)):
            stack.push_async_callback(started[name].stop)
        await asyncio.gather(started["registry"].start(), started["memory"].start())
        await asyncio.gather(started["executor-a"].start(), started["executor-b"].start())
        await started["gateway"].start()
        yield started


async def test_a_delegation_crosses_from_one_executor_process_to_another(
    processes: dict[str, ServiceProcess],
) -> None:
    client = MeshClient(processes["registry"].grpc_address, processes["gateway"].grpc_address)
    try:
        token = await client.login()
        worker = await client.seed_agent(token, name="worker", mock_responses=["Task 42 is processed."])
        coordinator = await client.seed_agent(
            token,
            name="coordinator",
            project=worker,
            network_access=["worker"],
            mock_responses=[delegate("worker", "Process task 42"), "Done: task 42 is processed."],
        )
        events = [r.event for r in await client.stream_chat(coordinator, "Please process task 42")]
    finally:
        await client.close()

    started = {e.agent: e.run_started.executor_id for e in events if kind(e) == "run_started"}
    assert set(started) == {"coordinator", "worker"}
    assert started["coordinator"] != started["worker"], "the worker ran in the other executor process"
    assert set(started.values()) == {"executor-a", "executor-b"}
    assert events[-1].agent == "coordinator"
    assert events[-1].run_completed.content == "Done: task 42 is processed."
    worker_text = "".join(
        e.text_delta.text for e in events if e.agent == "worker" and kind(e) == "text_delta"
    )
    assert worker_text == "Task 42 is processed."

    async with service_channel(processes["memory"].grpc_address) as channel:
        memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
        stored = (
            await memory.ListEvents(
                memory_service_pb2.ListEventsRequest(session_id=events[-1].session_id, page_size=100),
                metadata=bearer(token),
            )
        ).events
    assert [(e.agent, event_type(e)) for e in stored] == [
        ("coordinator", "user_message"),
        ("coordinator", "delegation_request"),
        ("worker", "task_delegation_received"),
        ("worker", "agent_response"),
        ("coordinator", "delegation_response"),
        ("coordinator", "agent_response"),
    ]
    request, received, response = stored[1], stored[2], stored[4]
    assert request.delegation_id == received.delegation_id == response.delegation_id != ""
    assert received.parent_event_id == response.parent_event_id == request.id
    assert json.loads(response.content) == {
        "agent": "worker",
        "outcome": "completed",
        "content": "Task 42 is processed.",
    }
