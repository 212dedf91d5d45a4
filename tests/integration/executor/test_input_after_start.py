"""A run's input reaches the log only once the registry started the run (gave it its lease), so
that an input in the log always has a lease: an executor that dies between the two leaves a run
its taker resumes, never an input that nothing answers (the chaos run found such inputs while
the two calls overlapped). The registry sits behind a proxy that holds its answer to the run's
start; meanwhile the session's log stays empty, and once the answer flows the chat completes."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest

from agentmesh.executor.client import ExecutorClient
from tests.bearer import service_channel
from tests.holding_proxy import HoldingProxy
from tests.integration.executor.support import Stack, event_type, extra_executor, kind
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

# How long the log is watched for an input that must not be there: an input recorded beside the
# start was in it within milliseconds.
WATCHED_SECONDS = 2.0


async def test_the_input_is_recorded_only_once_the_registry_started_the_run(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "steady", mock_responses=["done"])
    session = f"held-start-{uuid.uuid4().hex}"  # the marker: StartAgentRun names the session
    registry = stack.mesh.services["registry"]
    async with HoldingProxy(lambda: registry.address, session.encode(), hold_from=1) as proxy:
        executor = await extra_executor(stack, "behind-a-held-registry", registry_address=proxy.address)
        try:
            async with service_channel(executor.address) as channel:
                client = ExecutorClient(channel)
                # Known here (and runnable) after its first chats — the case that recorded its input
                # beside the start. Two: a spec resolved before the executor's watch of the registry
                # began is not kept.
                for _ in range(2):
                    warm_up = await _events(client, stack.run_request(agent, "warm up"), stack)
                    assert kind(warm_up[-1]) == "run_completed", warm_up[-1]
                chat = asyncio.create_task(_events(client, stack.run_request(agent, "go", session), stack))

                async def start_sent() -> bool:
                    return proxy.sightings >= 1 and proxy.holding

                await eventually(start_sent, what="the run's start sent, its answer held")
                watch_ends = asyncio.get_running_loop().time() + WATCHED_SECONDS
                while asyncio.get_running_loop().time() < watch_ends:
                    assert not await _recorded(stack, session), "an input in the log before its run started"
                    await asyncio.sleep(0.1)
                proxy.release()
                events = await chat
        finally:
            await executor.stop(1)

    assert kind(events[-1]) == "run_completed", events[-1]
    assert [event_type(e) for e in await stack.events(session)] == ["user_message", "agent_response"]


async def _events(client: ExecutorClient, request: object, stack: Stack) -> list:
    return [e async for e in client.run(request, metadata=stack.metadata)]


async def _recorded(stack: Stack, session: str) -> bool:
    try:
        return bool(await stack.events(session))
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
        return False
