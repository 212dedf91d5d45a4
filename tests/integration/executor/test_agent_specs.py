"""Executors remember resolved agents between runs (one registry call less per run) and still
follow every change: StartAgentRun returns the spec's revision, and a run whose remembered spec
is older resolves it again before building anything from it. This is what an executor does while
the registry's agent watch is down, so these run with it off (the pushed path: test_agent_watch)."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import types_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError, FailedPrecondition
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import SEQUENTIAL, Stack, final

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {
        "openai_base_url": openai_server.base_url,
        "openai_api_key": "sk-specs-" + "k" * 30,
        "agent_watch": False,
    }


async def test_a_remembered_agent_follows_changes_to_its_type(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = f"spec-{uuid.uuid4().hex[:8]}"
    openai_server.script(model, Reply(text="ok"))
    project = await stack.project()
    agent = await stack.agent(project, "follower", model=f"openai/{model}")

    assert final(await stack.run(agent, "first")).run_completed.content == "ok"
    type_id = (await stack.get(agent)).agent_type_id
    await stack.client.registry.UpdateAgentType(
        reg.UpdateAgentTypeRequest(
            agent_type=resources_pb2.AgentType(id=type_id, personality_prompt="You speak French."),
            update_mask=field_mask_pb2.FieldMask(paths=["personality_prompt"]),
        ),
        metadata=stack.metadata,
    )
    assert final(await stack.run(agent, "second")).run_completed.content == "ok"

    systems = [r.body["messages"][0] for r in openai_server.for_model(model)]
    assert [m["role"] for m in systems] == ["system", "system"]
    assert "You are follower." in systems[0]["content"]
    assert "You speak French." in systems[1]["content"]


@pytest.mark.parametrize("lifecycle", ["paused", "terminated"])
async def test_a_remembered_agent_that_was_stopped_since_refuses_to_run(stack: Stack, lifecycle: str) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "stopped", mock_responses=["hi"])
    assert final(await stack.run(agent, "warm up")).run_completed.content == "hi"
    await stack.settled(agent)
    await (stack.pause(agent) if lifecycle == "paused" else stack.terminate(agent))

    # The executor still remembers the agent as runnable; the registry refuses the start, and
    # nothing is recorded (an input is recorded only once its run started). Then it knows.
    for attempt in ("are you there?", "still there?"):
        session = f"refused-{uuid.uuid4().hex[:8]}"
        with pytest.raises(FailedPrecondition) as refused:
            await stack.run(agent, attempt, session_id=session)
        assert refused.value.reason == f"AGENT_{lifecycle.upper()}"
        with pytest.raises(grpc.aio.AioRpcError) as nothing:
            await stack.events(session)
        assert nothing.value.code() == grpc.StatusCode.NOT_FOUND
    assert (await stack.get(agent)).tasks_completed == 1


async def test_an_agent_that_cannot_be_set_up_refuses_its_runs_before_recording_them(stack: Stack) -> None:
    project = await stack.project()
    # A function tool this executor does not have: the agent cannot be built. (An MCP server that
    # is gone no longer stops a run: it goes on without its tools, see test_mcp_servers_by_name.)
    agent = await stack.agent(project, "fragile", tools=["no_such_tool"], mock_responses=["fine"])
    for attempt in ("warm up", "still there?"):  # not remembered, then remembered
        session = f"unbuildable-{uuid.uuid4().hex[:8]}"
        with pytest.raises(DomainError) as failed:
            await stack.run(agent, attempt, session_id=session)
        assert failed.value.reason == "UNKNOWN_TOOL"
        with pytest.raises(grpc.aio.AioRpcError) as nothing:
            await stack.events(session)
        assert nothing.value.code() == grpc.StatusCode.NOT_FOUND
    await stack.settled(agent)


async def test_a_remembered_agent_changed_into_one_that_cannot_run_is_refused(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "helper", mock_responses=["helped"])
    pipeline = await stack.agent(project, "pipeline", kind=SEQUENTIAL, sub_agents=["helper"])
    assert final(await stack.run(pipeline, "warm up")).run_completed.content
    await stack.settled(pipeline)

    # No sub-agents any more: the run's start returns a new revision, the executor resolves the
    # agent again and finds it cannot run, before it recorded anything.
    config = resources_pb2.AgentConfig(sub_agents=types_pb2.StringList(values=[]))
    await stack.update_config(pipeline, "config.sub_agents", config)
    session = f"emptied-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FailedPrecondition) as refused:
        await stack.run(pipeline, "go", session_id=session)
    assert refused.value.reason == "NO_SUB_AGENTS"
    with pytest.raises(grpc.aio.AioRpcError) as nothing:
        await stack.events(session)
    assert nothing.value.code() == grpc.StatusCode.NOT_FOUND
    assert (await stack.settled(pipeline)).tasks_completed == 1
