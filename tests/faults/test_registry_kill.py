"""SIGKILL the registry while chats run: runs keep going (the executors need the
registry only to start and end them), their ends wait in the executors' outbox for longer than
the old 5 s of retries, and once the registry is back every run is counted exactly once and no
agent stays `working`, no run is left in the registry's books (`agent_runs`, `runs_in_flight`),
and every session's log holds exactly one end per run."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.faults.processes import LEASE_SECONDS, Processes, run_bookkeeping, session_log
from tests.mesh import MeshClient, Seeded, bearer
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(240)]

CHATS = 6
# Each chat takes a few seconds: the registry dies while they run and stays away while they end.
SLOW = {"content": "slowly " * 30, "delay_seconds": 0.1}
AWAY_SECONDS = 8.0  # longer than the 5 s after which run ends used to be dropped


async def _chat(gateway: gw_grpc.GatewayServiceStub, agent: Seeded, n: int, started: asyncio.Event) -> str:
    """One chat; `started` is set once its run started (the registry counted it)."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=agent.ref, message="go", session_id=f"registry-away-{n}"),
        metadata=bearer(agent.token),
    )
    last = None
    async for response in call:
        started.set()
        last = response.event
    assert last is not None and last.HasField("run_completed"), last
    return last.run_completed.content


async def test_run_ends_wait_for_a_killed_registry_and_count_once(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        agent = await client.seed_agent(token, name="slow", mock_responses=[SLOW])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:

            async def record() -> dict[str, object]:
                response = await http.get(f"/api/v1/projects/{agent.project_id}/agents/{agent.agent_id}")
                return response.json()

            started = [asyncio.Event() for _ in range(CHATS)]
            chats = [asyncio.create_task(_chat(gateway, agent, n, started[n])) for n in range(CHATS)]

            async def all_running() -> bool:
                # Every run started (a chat not started yet needs the registry to start).
                return (
                    all(event.is_set() for event in started) and (await record()).get("status") == "working"
                )

            await eventually(all_running, timeout=60, what="the chats run")
            await mesh.registry.kill()
            answers = await asyncio.gather(*chats)  # they finish without the registry
            assert answers == [SLOW["content"]] * CHATS
            await asyncio.sleep(AWAY_SECONDS)
            await mesh.registry.start()

            async def settled() -> bool:
                try:
                    body = await record()
                except (httpx.HTTPError, grpc.aio.AioRpcError):
                    return False
                return body.get("status") == "idle" and body.get("tasks_completed") == CHATS

            try:
                await eventually(settled, timeout=LEASE_SECONDS * 15, what="every run counted once")
            except AssertionError:
                logs = "\n".join(e.output() for e in mesh.executors.values())
                raise AssertionError(f"{await record()}\n{logs}\n{mesh.registry.output()}") from None
            body = await record()
            assert (body["status"], body["tasks_completed"]) == ("idle", CHATS), body
            # No orphan: no lease row left behind, nothing in flight, once a lease time passed.
            await asyncio.sleep(LEASE_SECONDS)
            books = await run_bookkeeping(mesh.database_url)
            assert books.settled, books
            for n in range(CHATS):
                events = await session_log(http, agent.project_id, f"registry-away-{n}")
                assert events and log_problems(events) == [], (n, log_problems(events))
    finally:
        await client.close()
