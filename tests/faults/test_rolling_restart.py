"""A rolling restart of the executors loses no run: the services run as
processes on PostgreSQL with two executors whose drain grace is short. While delegating chats run,
each executor in turn gets SIGTERM and comes back. A run still going when its executor's grace
ends is handed over — stopped without an end, its lease released at once — and the other executor
resumes it from the log; its client's stream (which the gateway follows into the log when the
executor's stream ends UNAVAILABLE) ends with the run's answer. Afterwards: every chat completed
with its answer, no run was closed `EXECUTOR_LOST`, every session's log holds one end per run and
one response per delegation, and no run is left in the registry's books (both agents are idle)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.faults.load import delegating_chat, resumed_sessions_problems, until_no_problems
from tests.faults.processes import LEASE_SECONDS, Processes, running, seed_delegating_pair, session_log
from tests.mesh import MeshClient

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

CHATS = 6
# The worker answers slowly (47 chunks 0.2 s apart: about 10 s), so SIGTERMs land mid-run.
WORKER = {"content": "part " * 600, "delay_seconds": 0.2}


@pytest_asyncio.fixture
async def processes(postgres_database: str, tmp_path: Path) -> AsyncIterator[Processes]:
    async with running(postgres_database, tmp_path, AGENTMESH_EXECUTOR_SHUTDOWN_GRACE_SECONDS="0.5") as mesh:
        yield mesh


async def test_a_rolling_restart_of_the_executors_loses_no_run(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(client, token, worker=[WORKER])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        sessions = [f"rolling-{n}" for n in range(CHATS)]
        delegating = asyncio.Semaphore(0)
        chats = [asyncio.create_task(delegating_chat(gateway, coordinator, s, delegating)) for s in sessions]
        for _ in sessions:  # every chat is delegating to its slow worker: runs in flight everywhere
            await asyncio.wait_for(delegating.acquire(), timeout=60)
        for executor in mesh.executors.values():
            await executor.stop(timeout=30)  # SIGTERM: drain 0.5 s, then hand over
            await executor.start()
            await executor.wait_serving()
        streams = await asyncio.gather(*chats)

        for session, events in zip(sessions, streams, strict=True):
            (started,) = [e for e in events if e.HasField("run_started") and not e.delegation_path]
            finals = [
                e
                for e in events
                if e.run_id == started.run_id and (e.HasField("run_completed") or e.HasField("run_failed"))
            ]
            assert len(finals) == 1, (session, finals)
            assert finals[0].HasField("run_completed"), (session, finals[0])
            assert finals[0].run_completed.content == "done"

        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            await until_no_problems(
                mesh,
                lambda: resumed_sessions_problems(mesh, http, worker.project_id, sessions),
                timeout=LEASE_SECONDS * 10,
            )
            resumed = 0
            for session in sessions:
                events = await session_log(http, worker.project_id, session)
                resumed += [(e.get("metadata") or {}).get("reason") for e in events].count("RUN_RESUMED")
    finally:
        await client.close()
    print(f"{CHATS} chats through a rolling restart; {resumed} runs handed over and resumed")
    assert resumed >= 1  # the restart did hand runs over (else it proved nothing)
