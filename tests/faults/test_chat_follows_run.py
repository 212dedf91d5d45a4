"""A chat whose executor is SIGKILLed mid-run goes on from the session's log:
the caller's own call — a stream, or a unary Chat, which reads the same stream — is not broken
with the dead executor's `UNAVAILABLE: Socket closed`; it carries on, each recorded event once,
up to the run's one final event: the answer of the run the survivor resumed from the log."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import grpc
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from tests.counting import counting_server
from tests.faults.processes import LEASE_SECONDS, Processes, run_bookkeeping, seed_delegating_pair
from tests.mesh import MeshClient, bearer
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(180)]

# About ten seconds: 47 chunks of 64 characters, 0.2 s apart.
SLOW_WORKER = {"content": "part " * 600, "delay_seconds": 0.2}


@pytest.mark.long(40)
async def test_a_stream_whose_executor_dies_goes_on_to_the_runs_final_event(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        _, coordinator = await seed_delegating_pair(client, token, worker=[SLOW_WORKER])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        for attempt in range(3):
            call = gateway.StreamChat(
                gw.StreamChatRequest(agent=coordinator.ref, message="go", session_id=f"follow-{attempt}"),
                metadata=bearer(coordinator.token),
                timeout=LEASE_SECONDS * 20,
            )
            events, killed = [], ""
            async for response in call:  # an RPC error here is what this test is against
                event = response.event
                events.append(event)
                if event.HasField("delegation_request") and not killed:
                    killed = events[0].run_started.executor_id
                    await mesh.executors[killed].kill()
            final = events[-1]
            assert final.run_id == events[0].run_id
            # Resumed on the survivor from the log: it completes.
            assert final.HasField("run_completed"), final
            assert final.run_completed.content == "done"
            recorded = [event.seq for event in events if event.seq]
            assert recorded == sorted(set(recorded)), recorded
            await mesh.executors[killed].start()
            await mesh.executors[killed].wait_serving()
    finally:
        await client.close()


async def test_unary_chat_survives_its_executors_death(processes: Processes) -> None:
    """Chat answers with the run's answer — recorded by the executor that took the run over and
    resumed it — when the executor running it dies after the run started."""
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        agent = await client.seed_agent(token, name="slow", mock_responses=[SLOW_WORKER])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        memory = mem_grpc.MemoryServiceStub(client._gateway_channel)

        async def recorded(message: str) -> bool:
            request = mem.ListEventsRequest(session_id="unary", project_id=agent.project_id)
            try:
                events = (await memory.ListEvents(request, metadata=bearer(agent.token))).events
            except grpc.aio.AioRpcError:  # no session yet
                return False
            return any(event.content == message for event in events)

        chat = gateway.Chat(
            gw.ChatRequest(agent=agent.ref, message="go", session_id="unary"),
            metadata=bearer(agent.token),
            timeout=LEASE_SECONDS * 20,
        )
        answer = asyncio.ensure_future(chat)
        # Its input recorded, its run has started streaming to the gateway (no failover now).
        await eventually(lambda: recorded("go"), what="the chat's run started")
        # Every executor dies (whichever ran the chat), and comes back to close its runs.
        for executor in mesh.executors.values():
            await executor.kill()
        await asyncio.gather(*(executor.start() for executor in mesh.executors.values()))
        # The resumed run's answer (its step was not recorded: asked again), not the broken
        # connection nor a closed run's EXECUTOR_LOST.
        reply = await answer
        assert reply.content == SLOW_WORKER["content"]
    finally:
        await client.close()


@pytest.mark.parametrize("remembered", [True, False], ids=["remembered", "resolved"])
async def test_a_chat_whose_run_is_taken_over_before_its_first_event_gets_the_answer(
    processes: Processes, tmp_path: Path, remembered: bool
) -> None:
    """An executor stalls (SIGSTOP) while it sets up a run's agent — the run started at the
    registry, nothing of it recorded yet (an input is recorded once its agent is set up), no event
    of it at the chat — for longer than the lease, and the run is orphaned: its taker finds nothing
    to resume. When the stalled executor comes back, its renewal says the run was lost: it stops
    the run without an end and tells its caller so, and the chat is sent again to the other
    executor, which answers it once — whether the agent was remembered or resolved afresh. Before,
    the chat failed INTERNAL "the run ended before it started"."""
    mesh = processes
    count_file, hold = tmp_path / "calls.txt", tmp_path / "hold"
    tools = counting_server(count_file, name="held", HOLD_FILE=str(hold))
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        agent = await client.seed_agent(token, name="held", mock_responses=["done"], mcp_servers=[tools])
        if remembered:  # every executor runs the agent once, so it remembers its spec
            hold.touch()
            warmed: set[str] = set()
            for attempt in range(12):
                if warmed == set(mesh.executors):
                    break
                events = await client.stream_chat(agent, "warm up", session_id=f"warm-{attempt}")
                warmed |= {e.event.run_started.executor_id for e in events if e.event.HasField("run_started")}
            assert warmed == set(mesh.executors)
            hold.unlink()
        starts_before = _starts(count_file)
        chat = asyncio.ensure_future(client.stream_chat(agent, "go", session_id="held"))

        async def set_up() -> bool:
            if chat.done():  # what it got says why its run never set its agent up
                raise AssertionError(f"the chat ended before its run set its agent up: {chat!r}")
            return len(_starts(count_file)) > len(starts_before)

        await eventually(set_up, timeout=LEASE_SECONDS * 30, what="the run sets its agent up")
        (stalled_pid,) = _starts(count_file)[len(starts_before) :]
        (stalled,) = [e for e in mesh.executors.values() if e.pid == stalled_pid]
        os.kill(stalled_pid, signal.SIGSTOP)
        try:  # nothing recorded: the registry orphans the run, and its taker finds nothing
            await eventually(lambda: _orphaned(mesh), timeout=LEASE_SECONDS * 15, what="run orphaned")
        finally:
            os.kill(stalled_pid, signal.SIGCONT)

        async def heard_lost() -> bool:
            return "(lease lost)" in stalled.stderr_path.read_text(errors="replace")

        await eventually(heard_lost, timeout=LEASE_SECONDS * 15, what="the stalled one hears it lost the run")
        hold.touch()
        events = [response.event for response in await chat]
    finally:
        hold.touch()
        await client.close()
    assert events[0].HasField("run_started")
    finals = [e for e in events if e.HasField("run_completed") or e.HasField("run_failed")]
    assert len(finals) == 1 and finals[0] is events[-1], finals
    assert events[-1].run_completed.content == "done", events[-1]
    recorded = [event.seq for event in events if event.seq]
    assert recorded == sorted(set(recorded)), recorded


def _starts(count_file: Path) -> list[int]:
    """The pids of the executors that started the held MCP server, in order."""
    if not count_file.exists():
        return []
    lines = count_file.read_text().splitlines()
    return [int(line.split()[1]) for line in lines if line.startswith("started ")]


async def _orphaned(mesh: Processes) -> bool:
    """No run is held by a live lease any more (the stalled executor's was orphaned)."""
    books = await run_bookkeeping(mesh.database_url)
    return all(orphaned for _, _, orphaned in books.agent_runs)
