"""An executor cut off from a live registry: its runs' leases expire and another
executor takes them over while it is still alive and still reaches the memory service — a
network partition, not a death. The services run as processes on PostgreSQL; the executor the
gateway sends chats to talks to a registry replica of its own, which the test stops (SIGSTOP)
once the chat's run started, so that executor's renewals never arrive and nobody tells it the run
was lost. The replica is woken before the next test.

The taker records its note of the run's next incarnation before it reads the log, and the memory
service refuses every later event of the incarnation before, and every run it starts (memory
`fence.py`). So:
- an LLM run: its first model step outlasts the takeover and then calls a non-idempotent MCP tool
  (`record`, which counts its own calls in a file). The cut-off executor's tool call is refused at
  its intent, before the tool runs: `record` runs once for the chat, not once per executor; no
  event of the lost incarnation is in the log after the note; the run ends once, answered by the
  taker; the client's stream, broken by the cut-off executor, follows the run to that answer.
  Without the fence both executors ran the tool.
- a sequential workflow: its first sub-agent outlasts the takeover. Both the cut-off executor and
  the taker then start the second; only the taker's run is recorded: each sub-agent step has one
  run. Without the fence the second sub-agent ran twice.

And a cut-off executor says so: once it has renewed no lease for longer than a lease, its health
is NOT_SERVING (gateways and peers send runs to other executors first), until it renews again.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.registry.v1 import resources_pb2
from tests.counting import calls, counting_server
from tests.faults.load import resumed_sessions_problems, until_no_problems
from tests.faults.processes import LEASE_SECONDS, Processes, running, session_log
from tests.mesh import MeshClient, Seeded, bearer
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

CUT_OFF = "executor-1"
# Longer than a takeover (the lease, a sweep, a renewal), so the cut-off executor's step ends
# after the taker's note; the answer as long, so the taker reaches the tool before the cut-off
# executor could have answered (what made the tool run twice without the fence).
STEP_SECONDS = LEASE_SECONDS * 4
ACT = {
    "content": "",
    "tool_calls": [{"name": "record", "arguments": {"note": "once"}}],
    "delay_seconds": STEP_SECONDS,
}
ANSWER = {"content": "done", "delay_seconds": STEP_SECONDS}


@dataclass
class CutOff:
    """The mesh, a client logged in to it, and a way to cut the executor off."""

    mesh: Processes
    client: MeshClient
    token: str
    stopped: bool = False

    def cut(self) -> None:
        assert self.mesh.registry_replica is not None and self.mesh.registry_replica.pid is not None
        os.kill(self.mesh.registry_replica.pid, signal.SIGSTOP)
        self.stopped = True

    def reconnect(self) -> None:
        if self.stopped:
            assert self.mesh.registry_replica is not None and self.mesh.registry_replica.pid is not None
            os.kill(self.mesh.registry_replica.pid, signal.SIGCONT)
            self.stopped = False

    async def chat(self, agent: Seeded, session_id: str) -> list[run_pb2.RunEvent]:
        """A chat whose executor is cut off as soon as its run started: every event it gets."""
        gateway = gw_grpc.GatewayServiceStub(self.client._gateway_channel)
        call = gateway.StreamChat(
            gw.StreamChatRequest(agent=agent.ref, message="go", session_id=session_id),
            metadata=bearer(agent.token),
            timeout=STEP_SECONDS * 10,
        )
        events = []
        async for response in call:
            events.append(response.event)
            if response.event.HasField("run_started") and not self.stopped:
                assert response.event.run_started.executor_id == CUT_OFF, response.event
                self.cut()
        return events

    async def settles(self, http: httpx.AsyncClient, agent: Seeded, session_id: str) -> None:
        """Once it hears from the registry again, the cut-off executor lets its runs go: every
        run ended once, nothing left in anyone's books."""
        self.reconnect()

        async def problems() -> list[str]:
            return await resumed_sessions_problems(self.mesh, http, agent.project_id, [session_id])

        await until_no_problems(self.mesh, problems, timeout=LEASE_SECONDS * 10, what=f"{session_id} settles")


@pytest_asyncio.fixture
async def cut_off(postgres_database: str, tmp_path: Path) -> AsyncIterator[CutOff]:
    # The registry that stays up expires the cut-off executor's runs although it never heard
    # from it (its replica did): no startup grace to wait out.
    grace = {"AGENTMESH_REGISTRY_RUN_LEASE_STARTUP_GRACE_SECONDS": "0"}
    async with running(postgres_database, tmp_path, registry_env=grace, own_registry=CUT_OFF) as mesh:
        client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
        fixture = CutOff(mesh, client, await client.login())
        try:
            yield fixture
        finally:
            fixture.reconnect()
            await client.close()


def _lines(log: list[dict[str, Any]]) -> str:
    """The log, one line per event: what a failure needs to be understood."""
    return "\n".join(f"{e['seq']} {e['event_type']} {e['content'][:160]!r} {_metadata(e)}" for e in log)


def _metadata(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("metadata") or {}


async def test_a_cut_off_executor_runs_no_tool_of_a_run_taken_from_it(
    cut_off: CutOff, tmp_path: Path
) -> None:
    count_file = tmp_path / "tool-calls.txt"
    tools = counting_server(count_file)
    agent = await cut_off.client.seed_agent(
        cut_off.token, name="coordinator", mock_responses=[ACT, ANSWER], mcp_servers=[tools]
    )
    events = await cut_off.chat(agent, "tool")

    run_id, final = events[0].run_id, events[-1]
    # The stream broke at the cut-off executor and followed the run to the taker's answer.
    assert final.HasField("run_completed"), events
    assert final.run_completed.content == "done"
    assert sum(e.HasField("run_completed") or e.HasField("run_failed") for e in events) == 1
    headers = {"Authorization": f"Bearer {cut_off.token}"}
    async with httpx.AsyncClient(base_url=cut_off.mesh.gateway.http_url, headers=headers, timeout=10) as http:
        log = [e for e in await session_log(http, agent.project_id, "tool") if e["run_id"] == run_id]
        (note,) = [e for e in log if _metadata(e).get("reason") == "RUN_RESUMED"]
        assert _metadata(note)["executor_id"] == "executor-0", note
        after = [e for e in log if e["seq"] > note["seq"]]
        lost = [e for e in after if _metadata(e).get("resume") != 1]
        assert lost == [], f"the cut-off executor's events after the takeover: {lost}"
        assert after[-1]["event_type"] == "agent_response"
        # The tool ran once for the chat: on the taker, never again on the executor it was taken
        # from (or, should the takeover have come after the cut-off executor's call, there only:
        # the taker finds it in doubt and does not run it). Not at all only when the taker could
        # not connect the tool's server (the run then says so, and goes on without it).
        taker_without_tools = any(_metadata(e).get("reason") == "MCP_SERVER_UNAVAILABLE" for e in after)
        ran = calls(count_file, "record")
        assert ran == 1 or (ran == 0 and taker_without_tools), _lines(log)
        await cut_off.settles(http, agent, "tool")
    assert calls(count_file, "record") <= 1, _lines(log)


async def test_a_cut_off_executor_starts_no_sub_agent_of_a_workflow_taken_from_it(cut_off: CutOff) -> None:
    client, token = cut_off.client, cut_off.token
    first = await client.seed_agent(
        token, name="first", mock_responses=[{"content": "first done", "delay_seconds": STEP_SECONDS}]
    )
    await client.seed_agent(token, name="second", project=first, mock_responses=["second done"])
    pipeline = await client.seed_agent(
        token,
        name="pipeline",
        project=first,
        kind=resources_pb2.AGENT_KIND_SEQUENTIAL,
        sub_agents=["first", "second"],
    )
    events = await cut_off.chat(pipeline, "workflow")

    final = events[-1]
    seen = [(e.seq, e.run_id[:8], e.agent, e.WhichOneof("kind")) for e in events]
    assert final.run_id == events[0].run_id and final.HasField("run_completed"), seen
    assert final.run_completed.content == "second done"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=cut_off.mesh.gateway.http_url, headers=headers, timeout=10) as http:
        await cut_off.settles(http, pipeline, "workflow")
        log = await session_log(http, pipeline.project_id, "workflow")
    assert any(_metadata(e).get("reason") == "RUN_RESUMED" for e in log), "the workflow was not taken over"
    steps = Counter(
        _metadata(e)["sub_agent_id"].rpartition(":")[2]
        for e in log
        if e["event_type"] == "user_message" and "sub_agent_id" in _metadata(e)
    )
    assert steps == {"1": 1, "2": 1}, f"sub-agent runs per step: {steps}"


async def test_a_cut_off_executor_is_not_serving_until_it_renews_again(cut_off: CutOff) -> None:
    executor = cut_off.mesh.executors[CUT_OFF]
    async with grpc.aio.insecure_channel(executor.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)

        def status_is(wanted: int):
            async def check() -> bool:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                return reply.status == wanted

            return check

        assert await status_is(health_pb2.HealthCheckResponse.SERVING)()
        cut_off.cut()
        # A renewal is given up after a lease, and the executor counts itself cut off after a
        # lease without one: two leases and the renewal interval, on a busy host many more.
        await eventually(
            status_is(health_pb2.HealthCheckResponse.NOT_SERVING),
            timeout=LEASE_SECONDS * 10,
            what="the cut-off executor reports NOT_SERVING",
        )
        assert "renewed no lease" in executor.output()
        cut_off.reconnect()
        await eventually(
            status_is(health_pb2.HealthCheckResponse.SERVING),
            timeout=LEASE_SECONDS * 10,
            what="the executor serves again once it renews",
        )
