"""A run resumed on the survivor after its executor's SIGKILL is counted again: the
registry counted it out when its lease expired; the survivor counts it in when it
resumes it, so its agent is `working` while it goes on, and once it ends the agent is `idle`,
nothing is in flight or left in `agent_runs`, and the agent's usage and completed tasks hold the
resumed run exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.faults.processes import LEASE_SECONDS, Processes, run_bookkeeping
from tests.mesh import MeshClient, bearer
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(180)]

# About ten seconds (47 chunks, 0.2 s apart), with the usage the finish counts.
SLOW = {"content": "part " * 600, "delay_seconds": 0.2, "usage": {"input_tokens": 30, "output_tokens": 12}}


async def test_a_resumed_run_counts_as_working_and_its_usage_once(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        agent = await client.seed_agent(token, name="slow", mock_responses=[SLOW])

        async def record() -> resources_pb2.Agent:
            request = reg.GetAgentRequest(project_id=agent.project_id, id=agent.agent_id)
            return (await client.registry.GetAgent(request, metadata=bearer(agent.token))).agent

        call = client.gateway.StreamChat(
            gw.StreamChatRequest(agent=agent.ref, message="go", session_id="counted"),
            metadata=bearer(agent.token),
            timeout=LEASE_SECONDS * 30,
        )
        stream = aiter(call)
        first = (await anext(stream)).event
        killed = first.run_started.executor_id
        (survivor,) = set(mesh.executors) - {killed}
        await mesh.executors[killed].kill()
        rest = asyncio.ensure_future(_drain(stream))

        async def resumed_and_counted() -> bool:
            books = await run_bookkeeping(mesh.database_url)
            held = [(run, by, orphaned) for run, by, orphaned in books.agent_runs if run == first.run_id]
            return (
                held == [(first.run_id, survivor, False)]
                and books.runs_in_flight[agent.agent_id] == 1
                and agent.agent_id in books.working
            )

        # The dead executor's lease expires; the survivor takes the run over and resumes it
        # (asking the slow model again): meanwhile the run is in the books again, on the survivor.
        await eventually(
            resumed_and_counted, timeout=LEASE_SECONDS * 10, what="the resumed run is counted in flight"
        )
        assert (await record()).status == resources_pb2.AGENT_STATUS_WORKING
        final = (await rest)[-1]
        assert final.run_id == first.run_id and final.HasField("run_completed"), final

        async def settled() -> bool:
            return (await run_bookkeeping(mesh.database_url)).settled

        await eventually(settled, timeout=LEASE_SECONDS * 10, what="nothing left in the registry's books")
        counted = await record()
        assert counted.status == resources_pb2.AGENT_STATUS_IDLE
        # The resumed run's usage and task, once; the dead executor's unfinished attempt, never.
        assert (counted.tasks_completed, counted.tokens_used) == (1, 42)
        await asyncio.sleep(LEASE_SECONDS)  # a late renewal or sweep changes nothing
        assert (await record()).tasks_completed == 1
        assert (await run_bookkeeping(mesh.database_url)).settled
    finally:
        await client.close()


async def _drain(stream: AsyncIterator[gw.StreamChatResponse]) -> list[run_pb2.RunEvent]:
    return [response.event async for response in stream]
