"""Routing across executors: membership from the registry, session affinity, failover when an
executor crashes (a real process, SIGKILLed), push-back when executors are at their concurrency
cap. Routing does not depend on the database: these run on SQLite only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.runtime.service import RunningService
from tests.e2e.harness import ServiceProcess
from tests.integration.gateway.conftest import start_executor, start_gateway
from tests.integration.gateway.support import Agent, Api, suffix
from tests.mesh import JWT_SECRET, bearer
from tests.polling import eventually

# Holds an executor's slot for several seconds: the test cancels it when done.
SLOW = {"content": "busy " * 200, "delay_seconds": 0.25}


async def _chat(stub: gw_grpc.GatewayServiceStub, agent: Agent, session_id: str) -> tuple[str, str]:
    """(executor id, answer) of one chat."""
    call = stub.StreamChat(
        gw.StreamChatRequest(agent=agent.model, message=f"hello from {session_id}", session_id=session_id),
        metadata=bearer(agent.owner.token),
    )
    events = [response.event async for response in call]
    return events[0].run_started.executor_id, events[-1].run_completed.content


@pytest_asyncio.fixture(loop_scope="package")
async def executor_process(mesh: Mesh, tmp_path: Path) -> AsyncIterator[ServiceProcess]:
    """A second executor as a process of its own (so it can really be killed), in the pool."""
    env = {
        "AGENTMESH_EXECUTOR_HOST": "127.0.0.1",
        "AGENTMESH_EXECUTOR_PORT": "0",
        "AGENTMESH_REGISTRY_ADDRESS": mesh.services["registry"].address,
        "AGENTMESH_MEMORY_ADDRESS": mesh.services["memory"].address,
        "AGENTMESH_JWT_SECRET": JWT_SECRET,
        "AGENTMESH_EXECUTOR_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    }
    async with ServiceProcess.serve("executor", env=env, log_dir=tmp_path) as executor:
        yield executor  # leaving stops it (a no-op once the test killed it)


@pytest.mark.e2e
async def test_new_chats_still_answer_when_an_executor_is_killed(
    once: None, mesh: Mesh, api: Api, executor_process: ServiceProcess
) -> None:
    # A gateway that knows no executor but those the registry lists.
    gateway = await start_gateway(mesh, executor_addresses=[], executor_discovery=True)
    try:
        await eventually(lambda: _has(gateway, 2), what="the gateway learns both executors from the registry")
        agent = await api.agent()  # echoes
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            stub = gw_grpc.GatewayServiceStub(channel)
            sessions = [f"route-{suffix()}" for _ in range(12)]
            first = await asyncio.gather(*(_chat(stub, agent, s) for s in sessions))
            assert [answer for _, answer in first] == [f"hello from {s}" for s in sessions]
            in_process = mesh.services["executor"].executor_id  # type: ignore[attr-defined]
            assert len({executor for executor, _ in first}) == 2, "both executors take sessions"
            # Session affinity: the same session goes to the same executor again.
            again = await asyncio.gather(*(_chat(stub, agent, s) for s in sessions))
            assert [executor for executor, _ in again] == [executor for executor, _ in first]

            # Mid-test, one executor crashes (SIGKILL): every new chat still answers, on the survivor.
            in_flight = asyncio.create_task(_chat(stub, agent, sessions[0]))
            await executor_process.kill()
            await asyncio.gather(in_flight, return_exceptions=True)  # may fail: it may have run there
            more = [*sessions, *(f"new-{suffix()}" for _ in range(4))]
            after = await asyncio.wait_for(asyncio.gather(*(_chat(stub, agent, s) for s in more)), timeout=30)
            assert [answer for _, answer in after] == [f"hello from {s}" for s in more]
            assert {executor for executor, _ in after} == {in_process}
    finally:
        await gateway.stop(0)


async def _has(gateway: RunningService, count: int) -> bool:
    return len(gateway.router.addresses) >= count  # type: ignore[attr-defined]


async def test_busy_executors_push_back_and_the_gateway_fails_over(mesh: Mesh, api: Api, once: None) -> None:
    tiny = await start_executor(mesh, max_concurrent_runs=1, heartbeat_interval_seconds=3600)
    only_tiny = await start_gateway(mesh, executor_addresses=[tiny.address], executor_discovery=False)
    both = await start_gateway(
        mesh, executor_addresses=[tiny.address, mesh.services["executor"].address], executor_discovery=False
    )
    try:
        slow = await api.agent(name="slow", mock_responses=[SLOW])
        project = {"id": slow.project_id, "slug": slow.project_slug}
        agent = await api.agent(slow.owner, name="quick", project=project, mock_responses=["quick answer"])
        async with grpc.aio.insecure_channel(only_tiny.address) as channel:
            stub = gw_grpc.GatewayServiceStub(channel)
            holding = stub.StreamChat(
                gw.StreamChatRequest(agent=slow.model, message="hold the slot"),
                metadata=bearer(slow.owner.token),
            )
            await anext(aiter(holding))  # the run started: tiny's one slot is taken

            with pytest.raises(grpc.aio.AioRpcError) as busy:
                await stub.Chat(
                    gw.ChatRequest(agent=agent.model, message="me too"), metadata=bearer(agent.owner.token)
                )
            assert busy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            async with httpx.AsyncClient(base_url=only_tiny.http.url) as http:  # type: ignore[attr-defined]
                refused = await http.post(
                    f"{agent.base}/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "me too"}]},
                    headers=agent.owner.headers,
                )
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "1"

            # With another executor beside it, the refused run goes there instead.
            async with grpc.aio.insecure_channel(both.address) as both_channel:
                both_stub = gw_grpc.GatewayServiceStub(both_channel)
                answers = await asyncio.gather(
                    *(
                        both_stub.Chat(
                            gw.ChatRequest(
                                agent=agent.model, message="route me", session_id=f"busy-{suffix()}"
                            ),
                            metadata=bearer(agent.owner.token),
                        )
                        for _ in range(6)
                    )
                )
            assert [answer.content for answer in answers] == ["quick answer"] * 6
            holding.cancel()
    finally:
        await both.stop(0)
        await only_tiny.stop(0)
        await tiny.stop(0)
