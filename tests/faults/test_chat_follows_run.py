"""A chat whose executor is SIGKILLed mid-run goes on from the session's log (issue 15 item 3):
the caller's own call — a stream, or a unary Chat, which reads the same stream — is not broken
with the dead executor's `UNAVAILABLE: Socket closed`; it carries on, each recorded event once,
up to the run's one final event: the answer of the run the survivor resumed from the log."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from tests.faults.processes import LEASE_SECONDS, Processes, seed_delegating_pair
from tests.mesh import MeshClient, bearer
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(180)]

# About ten seconds: 47 chunks of 64 characters, 0.2 s apart.
SLOW_WORKER = {"content": "part " * 600, "delay_seconds": 0.2}


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
