"""Outages under a running gateway, every service a separate OS process:
a client is told which part failed, in its terms and without internal addresses, and an executor
back from an outage longer than gRPC's default reconnect backoff takes chats again within about
a second of serving."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.runtime.health import check_health
from tests.e2e.harness import ServiceProcess
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, Seeded
from tests.polling import eventually
from tests.ports import free_loopback_ports

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SERVICES = ("registry", "memory", "executor", "gateway")
# What gRPC core writes into its messages about a peer: none of it may reach a client.
ADDRESS = re.compile(r"ipv[46]:|127\.0\.0\.1|\[::1\]|localhost:\d+")
# Longer than gRPC's default reconnect backoff had grown to by the time the executor returned
# (the probe's 15 s outage cost 7.5 s more of failed chats).
OUTAGE_SECONDS = 15.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def processes(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, ServiceProcess]]:
    tmp_path: Path = tmp_path_factory.mktemp("faults")
    registry, memory, executor, gateway, http = free_loopback_ports(5)
    common = {
        "AGENTMESH_JWT_SECRET": JWT_SECRET,
        "AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{registry}",
        "AGENTMESH_MEMORY_ADDRESS": f"127.0.0.1:{memory}",
    }
    environments = {
        "registry": {
            "AGENTMESH_REGISTRY_PORT": str(registry),
            "AGENTMESH_REGISTRY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}",
            "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
            "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
            "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
            "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
        },
        "memory": {
            "AGENTMESH_MEMORY_PORT": str(memory),
            "AGENTMESH_MEMORY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}",
        },
        "executor": {
            "AGENTMESH_EXECUTOR_PORT": str(executor),
            "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": f"127.0.0.1:{executor}",
        },
        "gateway": {
            "AGENTMESH_GATEWAY_PORT": str(gateway),
            "AGENTMESH_GATEWAY_HTTP_PORT": str(http),
            "AGENTMESH_GATEWAY_EXECUTOR_ADDRESSES": json.dumps([f"127.0.0.1:{executor}"]),
            # No remembered ownership checks: every request asks the registry.
            "AGENTMESH_GATEWAY_ACCESS_GRANT_TTL_SECONDS": "0",
        },
    }
    started = {
        name: ServiceProcess.serve(name, env={**common, **environments[name]}, log_dir=tmp_path)
        for name in SERVICES
    }
    try:
        await asyncio.gather(started["registry"].start(), started["memory"].start())
        await started["executor"].start()
        await started["gateway"].start()
        yield started
    finally:
        for name in reversed(SERVICES):
            await started[name].stop()


@pytest_asyncio.fixture(loop_scope="module")
async def client(processes: dict[str, ServiceProcess]) -> AsyncIterator[MeshClient]:
    mesh = MeshClient(processes["registry"].grpc_address, processes["gateway"].grpc_address)
    try:
        yield mesh
    finally:
        await mesh.close()


async def _seed(client: MeshClient) -> Seeded:
    token = await client.login()
    return await client.seed_agent(token, name="steady", mock_responses=["still answering"])


async def _chat(client: MeshClient, seeded: Seeded) -> str:
    responses = await client.stream_chat(seeded, "are you there?")
    return responses[-1].event.run_completed.content


async def _chat_error(client: MeshClient, seeded: Seeded) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await _chat(client, seeded)
    return failed.value


async def test_a_registry_outage_names_the_registry_and_no_address(
    processes: dict[str, ServiceProcess], client: MeshClient
) -> None:
    seeded = await _seed(client)
    assert await _chat(client, seeded) == "still answering"
    registry = processes["registry"]
    await registry.stop()
    try:
        error = await _chat_error(client, seeded)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert "registry" in error.details() and "executor" not in error.details(), error.details()
        assert not ADDRESS.search(error.details()), error.details()

        async with httpx.AsyncClient(base_url=processes["gateway"].http_url) as http:
            listed = await http.get("/api/v1/projects", headers={"Authorization": f"Bearer {seeded.token}"})
        assert listed.status_code == 503, listed.text
        assert "registry" in listed.json()["detail"], listed.text
        assert not ADDRESS.search(listed.text), listed.text
    finally:
        await registry.start()
    await registry.wait_serving()

    async def answers() -> bool:
        try:
            return await _chat(client, seeded) == "still answering"
        except grpc.aio.AioRpcError:
            return False

    await eventually(answers, timeout=30, what="a chat after the registry returned")


async def test_a_returning_executor_takes_chats_within_about_a_second_of_serving(
    processes: dict[str, ServiceProcess], client: MeshClient
) -> None:
    seeded = await _seed(client)
    assert await _chat(client, seeded) == "still answering"
    executor = processes["executor"]
    await executor.stop()

    down_since = time.monotonic()
    error = await _chat_error(client, seeded)
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "no executor" in error.details(), error.details()
    assert not ADDRESS.search(error.details()), error.details()

    async def outage_over() -> bool:
        # The gateway keeps failing chats (and its channel keeps backing off) all along.
        with pytest.raises(grpc.aio.AioRpcError):
            await _chat(client, seeded)
        return time.monotonic() - down_since >= OUTAGE_SECONDS

    await eventually(outage_over, timeout=OUTAGE_SECONDS + 30, what="the executor's outage")

    await executor.start()  # the same port: the gateway's channel to it is the one it had

    async def executor_serving() -> bool:
        return await check_health(executor.grpc_address, timeout=1.0) == "SERVING"

    await eventually(executor_serving, timeout=30, what="the executor serving again")

    async def answers() -> bool:
        try:
            return await _chat(client, seeded) == "still answering"
        except grpc.aio.AioRpcError:
            return False

    # About a second of reconnect backoff at most; five allow for a loaded machine.
    await eventually(answers, timeout=5, what="a chat answered by the returning executor")
