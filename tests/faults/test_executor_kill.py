"""SIGKILL the executor running a delegating chat: the services run as separate
processes on PostgreSQL, with two executors. The coordinator's first step calls a non-idempotent
MCP tool (`record`), an idempotent one (`lookup`) and delegates to a slow worker; its second step
answers. After every kill, within the lease time plus a few renewals: the chat's run *completes*
(the surviving executor resumed it from the log: `run_completed`, never `EXECUTOR_LOST`), no agent
stays `working` and no run is left in the registry's books, every run in the session has exactly
one final event, every `delegation_request` exactly one `delegation_response`, `seq` has no gaps,
`record` ran at most once for the chat (the tool counts its own calls in a file), and the client,
resuming its broken stream by the last `seq` it saw, gets the rest of the run once each up to its
one final event. The killed executor comes back before the next chat.

Bounded in time: KILLS kills, stopping early once TIME_BUDGET_SECONDS passed (each kill costs a
lease expiry, the resumed run and an executor restart); it asserts at least MIN_KILLS.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.counting import calls, counting_server
from tests.faults.load import resumed_sessions_problems, until_no_problems
from tests.faults.processes import LEASE_SECONDS, Processes, seed_delegating_pair, session_log
from tests.mesh import MeshClient, Seeded, bearer

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(900), pytest.mark.long(74)]

KILLS = 20
MIN_KILLS = 20
TIME_BUDGET_SECONDS = 600.0
# The worker answers in a few dozen chunks, so kills land before, during and after delegating.
WORKER = {"content": "part " * 60, "delay_seconds": 0.01}
ACT = {
    "content": "",
    "tool_calls": [
        {"name": "record", "arguments": {"note": "chat"}},
        {"name": "lookup", "arguments": {"key": "k"}},
        {"name": "delegate", "arguments": {"agent": "worker", "task": "work"}},
    ],
}


@dataclass
class Chat:
    """What the client of a chat saw before its executor was killed."""

    executor_id: str = ""
    run_id: str = ""
    last_seq: int = 0
    ended: bool = False


async def _chat_until_kill(
    gateway: gw_grpc.GatewayServiceStub,
    coordinator: Seeded,
    session_id: str,
    kill_after: int,
    mesh: Processes,
) -> Chat:
    """Chats, and SIGKILLs the executor of the coordinator's run after `kill_after` events."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.ref, message="go", session_id=session_id),
        metadata=bearer(coordinator.token),
    )
    chat, received = Chat(), 0
    error: grpc.aio.AioRpcError | None = None
    try:
        async for response in call:
            event = response.event
            received += 1
            if event.HasField("run_started") and not chat.executor_id:
                chat.executor_id, chat.run_id = event.run_started.executor_id, event.run_id
            chat.last_seq = max(chat.last_seq, event.seq)
            if event.run_id == chat.run_id and (
                event.HasField("run_completed") or event.HasField("run_failed")
            ):
                chat.ended = True
            if received >= kill_after or chat.ended:
                break
    except grpc.aio.AioRpcError as broken:
        error = broken
    assert chat.executor_id in mesh.executors, (chat, error)
    await mesh.executors[chat.executor_id].kill()
    call.cancel()
    return chat


async def _resume(
    gateway: gw_grpc.GatewayServiceStub, coordinator: Seeded, session_id: str, chat: Chat
) -> list[run_pb2.RunEvent]:
    """The rest of the chat, resumed by the last seq its client saw."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(
            agent=coordinator.ref,
            session_id=session_id,
            resume_after_seq=chat.last_seq,
            resume_run_id=chat.run_id,
        ),
        metadata=bearer(coordinator.token),
        timeout=LEASE_SECONDS * 10,
    )
    return [response.event async for response in call]


async def test_sigkilled_executors_runs_resume_and_complete(processes: Processes, tmp_path: Path) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    count_file = tmp_path / "tool-calls.txt"
    tools = counting_server(count_file)
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(
            client, token, worker=[WORKER], coordinator=[ACT, "done"], coordinator_mcp_servers=[tools]
        )
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        # Both executors connect the MCP server once before the kills (a first connection is
        # the slowest step of a run on a busy machine).
        warmed: set[str] = set()
        for attempt in range(8):
            if warmed == set(mesh.executors):
                break
            events = await client.stream_chat(coordinator, "warm up", session_id=f"warm-{attempt}")
            warmed |= {e.event.run_started.executor_id for e in events if e.event.HasField("run_started")}
        headers = {"Authorization": f"Bearer {token}"}
        rng = random.Random(15)
        started = time.monotonic()
        kills = mid_run = 0
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            while kills < KILLS and time.monotonic() - started < TIME_BUDGET_SECONDS:
                session_id = f"kill-{kills}"
                records_before = calls(count_file, "record")
                chat = await _chat_until_kill(gateway, coordinator, session_id, rng.randint(1, 25), mesh)
                kills += 1
                mid_run += not chat.ended
                restart = asyncio.create_task(mesh.executors[chat.executor_id].start())
                # The client picks its stream up by the last seq it saw: the rest, once each,
                # up to the run's one final event (its executor's death, told by the survivor).
                rest = await _resume(gateway, coordinator, session_id, chat)
                recorded = await session_log(http, worker.project_id, session_id)
                log = [e for e in recorded if e["seq"] > chat.last_seq]
                if chat.ended:
                    assert rest == []
                else:
                    final = rest[-1]
                    assert final.run_id == chat.run_id, rest
                    # Resumed on the survivor from the log: it completes, it is not closed.
                    assert final.HasField("run_completed"), final
                    assert final.run_completed.content == "done", final
                    assert sum(e.run_id == chat.run_id and e.HasField("run_completed") for e in rest) == 1
                    assert [e.seq for e in rest] == [e["seq"] for e in log if e["seq"] <= final.seq]

                async def kill_problems(session_id: str = session_id, run_id: str = chat.run_id) -> list[str]:
                    found = await resumed_sessions_problems(mesh, http, worker.project_id, [session_id])
                    answers = [
                        e
                        for e in await session_log(http, worker.project_id, session_id)
                        if e["run_id"] == run_id and e["event_type"] == "agent_response"
                    ]
                    if len(answers) != 1:
                        found.append(f"{session_id}: run {run_id} answered {len(answers)} times")
                    return found

                what = f"after kill {kills}, {session_id} settles"
                await until_no_problems(mesh, kill_problems, timeout=LEASE_SECONDS * 10, what=what)
                # The non-idempotent tool ran at most once for this chat, however it was resumed.
                assert calls(count_file, "record") - records_before <= 1, count_file.read_text()
                await restart
                await mesh.executors[chat.executor_id].wait_serving()
    finally:
        await client.close()
    print(f"{kills} SIGKILLs ({mid_run} mid-chat) in {time.monotonic() - started:.0f}s")
    assert kills >= MIN_KILLS
    assert mid_run >= kills // 2
