"""An upgrade without downtime. The previous release's executors and gateway (its code, from the
commit `releases.toml` names) serve beside this tree's registry and memory, whose schema is this
tree's, while delegating chats run. Then each executor in turn is replaced by this tree's (SIGTERM:
drain, hand its runs over, start the new code), and the gateway by a new one started beside it.
Every chat completes with its answer, through whichever gateway took it; every session's log holds
one end per run and one response per delegation; nothing is left in the registry's books; and
every old process exits 0. (Release 0.3.0's executors finish their runs on SIGTERM rather than
hand them over; a run this tree's executor hands over is resumed by the other:
test_rolling_restart.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.e2e.harness import ServiceProcess
from tests.faults.load import delegating_chat, resumed_sessions_problems, until_no_problems
from tests.faults.processes import LEASE_SECONDS, Processes, seed_delegating_pair
from tests.mesh import MeshClient, Seeded
from tests.releases import previous_release, python_path, release_code

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300), pytest.mark.long(45)]

PREVIOUS = previous_release()
CHATS = 4
# The worker answers slowly (25 chunks 0.2 s apart: about 5 s), so the executors' SIGTERMs land
# while runs are in flight.
WORKER = {"content": "part " * 300, "delay_seconds": 0.2}


@pytest.fixture(scope="module")
def previous_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    code = release_code(PREVIOUS, tmp_path_factory.mktemp(f"agentmesh-{PREVIOUS.version}"))
    if code is None:
        pytest.skip(f"this clone does not hold release {PREVIOUS.version}'s commit {PREVIOUS.commit[:12]}")
    return code


@pytest_asyncio.fixture
async def processes(postgres_database: str, tmp_path: Path, previous_code: Path) -> AsyncIterator[Processes]:
    # The executors' drain grace is the default (10 s), longer than a run here: release 0.3.0's
    # executors cancel what is still running when it ends (docs/upgrades.md).
    mesh = Processes(postgres_database, tmp_path)
    for process in (*mesh.executors.values(), mesh.gateway):
        process.env["PYTHONPATH"] = python_path(previous_code)
    try:
        await mesh.start()
        yield mesh
    finally:
        await mesh.stop()


async def _chats(
    gateway: gw_grpc.GatewayServiceStub, coordinator: Seeded, sessions: list[str]
) -> list[asyncio.Task]:
    """The chats started, once each has delegated to its slow worker: runs in flight everywhere."""
    delegating = asyncio.Semaphore(0)
    chats = [asyncio.create_task(delegating_chat(gateway, coordinator, s, delegating)) for s in sessions]
    for _ in sessions:
        await asyncio.wait_for(delegating.acquire(), timeout=60)
    return chats


async def _upgraded(process: ServiceProcess) -> int | None:
    """Stops the old release's process (its exit code) and starts this tree's in its place."""
    code = await process.stop(timeout=30)
    del process.env["PYTHONPATH"]
    await process.start()
    await process.wait_serving()
    return code


def _outcome(events: list[run_pb2.RunEvent]) -> str:
    """`answered` when the chat's own run ended once, completed with the coordinator's answer;
    else what its stream ended with."""
    started = [e for e in events if e.HasField("run_started") and not e.delegation_path]
    ends = [
        e
        for e in events
        if started
        and e.run_id == started[0].run_id
        and e.WhichOneof("kind") in ("run_completed", "run_failed")
    ]
    if len(ends) == 1 and ends[0].HasField("run_completed") and ends[0].run_completed.content == "done":
        return "answered"
    return (
        f"{len(ends)} ends; the stream's last events: {[str(e).replace(chr(10), ' ') for e in events[-3:]]}"
    )


async def test_the_previous_release_rolls_to_this_one_with_chats_in_flight(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    new_gateway = mesh.new_gateway("gateway-new")
    mesh.extra.append(new_gateway)
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(client, token, worker=[WORKER])
        old = gw_grpc.GatewayServiceStub(client._gateway_channel)
        first = [f"upgrade-{PREVIOUS.version}-{n}" for n in range(CHATS)]
        chats = await _chats(old, coordinator, first)
        exit_codes = [await _upgraded(executor) for executor in mesh.executors.values()]
        first_streams = await asyncio.gather(*chats)

        await new_gateway.start()
        async with grpc.aio.insecure_channel(new_gateway.grpc_address) as channel:
            new = gw_grpc.GatewayServiceStub(channel)
            second = [f"upgraded-{n}" for n in range(2)]
            second_streams = await asyncio.gather(*await _chats(new, coordinator, second))
        exit_codes.append(await mesh.gateway.stop(timeout=30))

        assert [_outcome(events) for events in first_streams + second_streams] == ["answered"] * (CHATS + 2)
        assert exit_codes == [0, 0, 0], "an old process did not exit cleanly on SIGTERM"
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=new_gateway.http_url, headers=headers, timeout=10) as http:
            await until_no_problems(
                mesh,
                lambda: resumed_sessions_problems(mesh, http, worker.project_id, first + second),
                timeout=LEASE_SECONDS * 10,
            )
    finally:
        await client.close()
