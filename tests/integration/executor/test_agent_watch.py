"""The registry pushes agents' changes to executors as they commit (WatchAgents): a
change is seen by the executor without a chat, a chat after an update runs the new spec, a
terminated agent's run is refused at the executor before anything is recorded, and a registry
restart loses no change made while the watch was down (the stream starts with a reset)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import grpc
import pytest

from agentmesh.executor.app import ExecutorService
from agentmesh.registry.app import RegistryService, start
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition
from tests.integration.executor.support import Agent, Stack, final
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _executor(stack: Stack) -> ExecutorService:
    service = stack.mesh.services["executor"]
    assert isinstance(service, ExecutorService) and service.watcher is not None
    return service


async def _after_push(stack: Stack, change: Callable[[], Awaitable[None]]) -> None:
    """Makes `change` and waits until the executor has taken it in (no chat in between)."""
    watcher = _executor(stack).watcher
    assert watcher is not None
    await eventually(lambda: _true(watcher.connects > 0), what="the executor watches the registry")
    before = watcher.changes
    await change()
    await eventually(lambda: _true(watcher.changes > before), what="the change reaches the executor")


async def _true(value: bool) -> bool:
    return value


async def _nothing_recorded(stack: Stack, session_id: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as nothing:
        await stack.events(session_id)
    assert nothing.value.code() == grpc.StatusCode.NOT_FOUND


async def _warm(stack: Stack, name: str, answers: list[str]) -> Agent:
    project = await stack.project()
    agent = await stack.agent(project, name, mock_responses=answers)
    assert final(await stack.run(agent, "warm up")).run_completed.content == answers[0]
    await stack.settled(agent)
    return agent


async def test_a_termination_is_pushed_and_refused_at_the_executor(stack: Stack) -> None:
    agent = await _warm(stack, "ended", ["hi"])
    await _after_push(stack, lambda: stack.terminate(agent))

    session = f"terminated-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FailedPrecondition) as refused:
        await stack.run(agent, "are you there?", session_id=session)
    assert refused.value.reason == "AGENT_TERMINATED"
    assert refused.value.message == "agent 'ended' is terminated"
    await _nothing_recorded(stack, session)  # refused before the input was recorded
    assert (await stack.get(agent)).tasks_completed == 1


async def test_a_pause_is_pushed_and_a_resume_right_after_it_runs(stack: Stack) -> None:
    agent = await _warm(stack, "napper", ["awake"])
    await _after_push(stack, lambda: stack.pause(agent))

    session = f"paused-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FailedPrecondition) as refused:
        await stack.run(agent, "are you there?", session_id=session)
    assert refused.value.reason == "AGENT_PAUSED"
    await _nothing_recorded(stack, session)  # known paused: its input is not recorded first

    # A chat right after the resume runs, whether or not the push has arrived yet.
    await stack.client.registry.ResumeAgent(
        reg.ResumeAgentRequest(project_id=agent.project.id, id=agent.id), metadata=stack.metadata
    )
    assert final(await stack.run(agent, "now?")).run_completed.content == "awake"


async def test_an_update_is_pushed_and_the_next_chat_runs_the_new_spec(stack: Stack) -> None:
    agent = await _warm(stack, "changer", ["before"])
    config = resources_pb2.AgentConfig()
    config.mock_responses.append("after")
    await _after_push(stack, lambda: stack.update_config(agent, "config.mock_responses", config))
    assert final(await stack.run(agent, "and now?")).run_completed.content == "after"


async def test_a_change_made_while_the_registry_was_away_is_not_lost(stack: Stack) -> None:
    agent = await _warm(stack, "absent", ["hi"])
    watcher = _executor(stack).watcher
    assert watcher is not None
    await eventually(lambda: _true(watcher.connects > 0), what="the executor watches the registry")
    connects = watcher.connects
    registry = stack.mesh.services["registry"]
    assert isinstance(registry, RegistryService)
    port = int(registry.address.rsplit(":", 1)[1])
    await registry.stop(1)

    # Another replica on the same database terminates the agent while the first one is away:
    # no executor watches it, nothing is pushed.
    replica = await start(registry.settings.model_copy(update={"port": 0}))
    try:
        async with grpc.aio.insecure_channel(replica.address) as channel:
            await reg_grpc.RegistryServiceStub(channel).DeleteAgent(
                reg.DeleteAgentRequest(project_id=agent.project.id, id=agent.id), metadata=stack.metadata
            )
    finally:
        await replica.stop(1)
    # The first registry comes back where it was (its clients' channels reconnect to it).
    stack.mesh.services["registry"] = await start(registry.settings.model_copy(update={"port": port}))

    # The executor reconnects; its stream starts with a reset, so it forgets the agent it
    # remembered as runnable: the run is refused at once, before anything is recorded.
    await eventually(lambda: _true(watcher.connects > connects), timeout=30, what="the watch reconnects")
    session = f"away-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FailedPrecondition) as refused:
        await stack.run(agent, "still there?", session_id=session)
    assert refused.value.reason == "AGENT_TERMINATED"
    await _nothing_recorded(stack, session)
