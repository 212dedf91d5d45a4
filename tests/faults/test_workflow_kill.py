"""SIGKILL the executor running a workflow, or a delegating run whose child runs on the other
executor (workflows resume; a child run outlives its caller's death). The services run
as separate processes on PostgreSQL with two executors, each taking one run at a time
(`max_concurrent_runs` 1), so a run's children are refused by its own executor and go to the
other one: killing the caller's executor leaves its children running there.

After every kill, within the lease time plus a few renewals: the workflow's run *completes* on the
survivor with the answer an unkilled run gives (never `EXECUTOR_LOST`), every sub-agent step has
exactly one run (`sub_agent_id`: none run twice, whether it had ended or was still going), every
run in the session has one final event and every delegation one response, `seq` has no gaps, and
every agent is idle. The client, resuming its broken stream by the last `seq` it saw, gets the rest
once up to the run's one final event. A delegated child whose caller was killed is not cancelled:
it answers, and the resumed caller records that answer as the delegation's response. And a child
whose own executor is stopped (SIGTERM: handed over) is followed by its live caller in the log up
to its resumed run's answer.

Bounded in time: KILLS kills per workflow kind and DELEGATION_KILLS for the delegating pair,
stopping early once TIME_BUDGET_SECONDS passed; at least MIN_KILLS in all.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.registry.v1 import resources_pb2
from tests.faults.processes import LEASE_SECONDS, Processes, running, seed_delegating_pair, session_log
from tests.faults.test_executor_kill import _chat_until_kill, _resume
from tests.mesh import MeshClient, Seeded, bearer
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(900)]

KILLS = 4
DELEGATION_KILLS = 3
MIN_KILLS = 8
TIME_BUDGET_SECONDS = 420.0


def _step(name: str) -> dict[str, Any]:
    """A sub-agent's scripted answer: three chunks (64 characters each), so a step streams about
    six events and kills land before, in and after each."""
    return {"content": f"{name}: " + "word " * 30, "delay_seconds": 0.03}


@pytest_asyncio.fixture
async def one_run_each(postgres_database: str, tmp_path: Path) -> AsyncIterator[Processes]:
    """The mesh with two executors that take one run at a time (and hand over after 0.5 s of
    drain on SIGTERM)."""
    async with running(
        postgres_database,
        tmp_path,
        AGENTMESH_EXECUTOR_MAX_CONCURRENT_RUNS="1",
        AGENTMESH_EXECUTOR_SHUTDOWN_GRACE_SECONDS="0.5",
    ) as mesh:
        yield mesh


class Watcher:
    """Reads agents' status and sessions' logs over the gateway's REST API."""

    def __init__(self, http: httpx.AsyncClient, agents: list[Seeded]) -> None:
        self.http = http
        self.agents = agents

    async def all_idle(self) -> bool:
        for agent in self.agents:
            response = await self.http.get(f"/api/v1/projects/{agent.project_id}/agents/{agent.agent_id}")
            assert response.status_code == 200, response.text
            if response.json()["status"] != "idle":
                return False
        return True

    async def log(self, session_id: str) -> list[dict[str, Any]]:
        return await session_log(self.http, self.agents[0].project_id, session_id)


def _sub_agent_runs(events: list[dict[str, Any]]) -> Counter[str]:
    """How many runs each sub_agent_id has in the log."""
    return Counter(
        (e.get("metadata") or {})["sub_agent_id"]
        for e in events
        if e["event_type"] == "user_message" and "sub_agent_id" in (e.get("metadata") or {})
    )


async def _kill_and_follow(
    mesh: Processes,
    gateway: gw_grpc.GatewayServiceStub,
    agent: Seeded,
    session_id: str,
    kill_after: int,
    answer: str,
) -> tuple[str, bool]:
    """Chats with `agent`, kills its run's executor after `kill_after` events, restarts it, and
    checks the resumed stream ends with `answer`; (the run id, whether the kill was mid-run)."""
    chat = await _chat_until_kill(gateway, agent, session_id, kill_after, mesh)
    restart = asyncio.create_task(mesh.executors[chat.executor_id].start())
    rest = await _resume(gateway, agent, session_id, chat)
    if not chat.ended:
        final = rest[-1]
        assert final.run_id == chat.run_id, rest
        assert final.HasField("run_completed"), final
        assert final.run_completed.content == answer, final
        assert sum(e.run_id == chat.run_id and e.HasField("run_completed") for e in rest) == 1
    await restart
    await mesh.executors[chat.executor_id].wait_serving()
    return chat.run_id, not chat.ended


async def _settles(
    watcher: Watcher, session_id: str, run_id: str, *, steps: int, kill: int
) -> list[dict[str, Any]]:
    """Waits until the session's log and the agents hold the invariants; the log."""

    async def settled() -> bool:
        if not await watcher.all_idle():
            return False
        events = await watcher.log(session_id)
        lost = [e for e in events if (e.get("metadata") or {}).get("reason") == "EXECUTOR_LOST"]
        answered = [e for e in events if e["run_id"] == run_id and e["event_type"] == "agent_response"]
        return log_problems(events) == [] and not lost and len(answered) == 1

    try:
        await eventually(settled, timeout=LEASE_SECONDS * 15, what=f"{session_id} settles")
    except AssertionError:
        events = await watcher.log(session_id)
        summary = [
            (e["seq"], e["run_id"][:6], e["agent"], e["event_type"], e["content"][:40], e.get("metadata"))
            for e in events
        ]
        raise AssertionError(
            f"after kill {kill}: idle {await watcher.all_idle()}; {log_problems(events)}; "
            f"run {run_id[:6]}:\n" + "\n".join(map(str, summary))
        ) from None
    events = await watcher.log(session_id)
    if steps:
        runs = _sub_agent_runs(events)
        # Every step ran, and none twice: an ended one was taken from the log, a running one
        # waited for, a missing one started once.
        assert len(runs) == steps and set(runs.values()) == {1}, runs
    return events


async def test_sigkilled_workflows_resume_and_complete(one_run_each: Processes) -> None:
    mesh = one_run_each
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        first = await client.seed_agent(token, name="first", mock_responses=[_step("first")])
        project = first
        second = await client.seed_agent(
            token, name="second", project=project, mock_responses=[_step("second")]
        )
        third = await client.seed_agent(token, name="third", project=project, mock_responses=[_step("third")])
        pipeline = await client.seed_agent(
            token,
            name="pipeline",
            project=project,
            kind=resources_pb2.AGENT_KIND_SEQUENTIAL,
            sub_agents=["first", "second", "third"],
        )
        loop = await client.seed_agent(
            token,
            name="loop",
            project=project,
            kind=resources_pb2.AGENT_KIND_LOOP,
            sub_agents=["first", "second"],
            max_iterations=2,
        )
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        headers = {"Authorization": f"Bearer {token}"}
        rng = random.Random(1515)
        started = time.monotonic()
        kills = mid_run = 0
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            watcher = Watcher(http, [first, second, third, pipeline, loop])
            plans = [(pipeline, 3, _step("third")["content"]), (loop, 4, _step("second")["content"])]
            for n in range(KILLS * len(plans)):
                if time.monotonic() - started > TIME_BUDGET_SECONDS:
                    break
                agent, steps, answer = plans[n % len(plans)]
                session_id = f"wf-kill-{n}"
                run_id, mid = await _kill_and_follow(
                    mesh, gateway, agent, session_id, rng.randint(1, 6 * steps), answer
                )
                kills += 1
                mid_run += mid
                events = await _settles(watcher, session_id, run_id, steps=steps, kill=kills)
                (end,) = [e for e in events if e["run_id"] == run_id and e["event_type"] == "agent_response"]
                assert end["content"] == answer
                if agent is loop:
                    assert (end.get("metadata") or {}).get("iterations") == 2, end
    finally:
        await client.close()
    print(f"{kills} workflow SIGKILLs ({mid_run} mid-run) in {time.monotonic() - started:.0f}s")
    assert kills >= MIN_KILLS
    assert mid_run >= kills // 2


async def test_a_child_outlives_its_killed_caller_and_answers_it(one_run_each: Processes) -> None:
    mesh = one_run_each
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    worker_answer = "worked: " + "part " * 40
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(
            client, token, worker=[{"content": worker_answer, "delay_seconds": 0.05}]
        )
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        headers = {"Authorization": f"Bearer {token}"}
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            watcher = Watcher(http, [worker, coordinator])
            for n in range(DELEGATION_KILLS):
                session_id = f"outlive-{n}"
                # Killed once the worker streams (its run is going on the other executor).
                run_id, mid = await _kill_and_follow(mesh, gateway, coordinator, session_id, 6 + n, "done")
                assert mid
                events = await _settles(watcher, session_id, run_id, steps=0, kill=n + 1)
                worker_runs = {e["run_id"] for e in events if e["event_type"] == "task_delegation_received"}
                assert len(worker_runs) == 1, events  # not sent again
                (worker_end,) = [
                    e
                    for e in events
                    if e["run_id"] in worker_runs
                    and e["event_type"] in ("agent_response", "error")
                    and (e["event_type"] == "agent_response" or "code" in (e.get("metadata") or {}))
                ]
                # Not cancelled with its caller: it answered, and its answer reached the caller.
                assert worker_end["event_type"] == "agent_response", worker_end
                (response,) = [e for e in events if e["event_type"] == "delegation_response"]
                assert json.loads(response["content"]) == {
                    "agent": "worker",
                    "outcome": "completed",
                    "content": worker_answer,
                }
    finally:
        await client.close()
    print(f"{DELEGATION_KILLS} caller SIGKILLs in {time.monotonic() - started:.0f}s")


async def test_a_caller_follows_its_handed_over_child_in_the_log(one_run_each: Processes) -> None:
    """SIGTERM the worker's executor while it streams: the worker is handed over and resumed
    elsewhere; its caller, alive on the other executor, follows it in the log (it used to record
    the delegation failed with the handover's UNAVAILABLE) and gets its answer."""
    mesh = one_run_each
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    worker_answer = "worked: " + "part " * 300  # 24 chunks 0.2 s apart
    try:
        token = await client.login()
        worker, coordinator = await seed_delegating_pair(
            client, token, worker=[{"content": worker_answer, "delay_seconds": 0.2}]
        )
        call = client.gateway.StreamChat(
            gw.StreamChatRequest(agent=coordinator.ref, message="go", session_id="handover"),
            metadata=bearer(coordinator.token),
            timeout=120,
        )
        events, stopping = [], None
        async for response in call:
            event = response.event
            events.append(event)
            if event.agent == "worker" and event.HasField("text_delta") and stopping is None:
                worker_executor = next(
                    e.run_started.executor_id
                    for e in events
                    if e.agent == "worker" and e.HasField("run_started")
                )
                stopping = asyncio.create_task(mesh.executors[worker_executor].stop(timeout=30))
        assert stopping is not None, events
        await stopping
        (response,) = [e for e in events if e.HasField("delegation_response")]
        assert response.delegation_response.outcome == run_pb2.DELEGATION_OUTCOME_COMPLETED, response
        assert response.delegation_response.content == worker_answer
        assert events[-1].HasField("run_completed") and events[-1].run_completed.content == "done"
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            log = await session_log(http, worker.project_id, "handover")
        assert log_problems(log) == []
        assert sum(e["event_type"] == "task_delegation_received" for e in log) == 1
        assert any(
            (e.get("metadata") or {}).get("reason") == "RUN_RESUMED" for e in log if e["agent"] == "worker"
        )
        await mesh.executors[worker_executor].start()
    finally:
        await client.close()
