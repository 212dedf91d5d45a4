"""SIGKILL the memory service while chats run — delegating streams and unary chats — keep it away
several seconds, restart it (issue 15, "whatever dies"). Once it is back: every acknowledged input
is in its session's log, every run has exactly one final event and every delegation one response
(the executors' event outbox keeps ends memory did not take), `seq` has no gaps, and the registry
holds no run in flight. Chats started during the outage are refused clearly, never with INTERNAL;
chats started after it work."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.faults.load import ChatLoad, assert_settles, assert_told_clearly
from tests.faults.processes import LEASE_SECONDS, Processes, seed_delegating_pair
from tests.mesh import MeshClient

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

# A worker answer of about two seconds (16 chunks, 0.1 s apart), so the kill lands mid-run.
WORKER = {"content": "part " * 200, "delay_seconds": 0.1}
AWAY_SECONDS = 4.0
CHATS = 8


async def test_a_killed_memory_service_loses_no_acknowledged_input_and_leaves_one_end_per_run(
    processes: Processes,
) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(client, token, worker=[WORKER])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        load = ChatLoad(gateway, worker, coordinator, "memory-away")
        async with httpx.AsyncClient(
            base_url=mesh.gateway.http_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        ) as http:
            await load.wait_started(load.start(CHATS))
            await asyncio.sleep(0.5)  # the worker is answering
            await mesh.memory.kill()
            load.start(CHATS // 2)  # refused while memory is away, or waiting for it
            await asyncio.sleep(AWAY_SECONDS)
            await mesh.memory.start()
            await load.until_answered()
            await load.finish()
            after = load.start(CHATS // 2)
            await load.finish()
            assert [o.final for o in after] == ["run_completed"] * len(after), [o.error for o in after]
            await assert_settles(mesh, http, worker.project_id, load.outcomes, timeout=LEASE_SECONDS * 15)
            assert_told_clearly(load.outcomes, "memory", mesh.memory.grpc_address)
    finally:
        await client.close()
