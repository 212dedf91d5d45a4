"""Runs waiting for a person hold nothing, so no executor's death touches them: the services run as
separate processes on PostgreSQL with two executors; several chats each ask for approval of a
non-idempotent MCP tool (`record`, which counts its own calls in a file) and suspend; every
executor that ran one is SIGKILLed; a fresh executor takes the place of the dead. Each approval,
sent as two concurrent responses, counts once (the other is refused naming the first), resumes its
run on a live executor, and `record` runs exactly once per chat; every session ends with exactly
one final event, and no agent is left `working` or `waiting`. The same holds for a tree that waits:
a coordinator delegates to the careful agent, whose request parks both runs; every executor that
ran either dies; the approval at the top resumes the worker, then the coordinator, once each."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from agentmesh.common.v1 import run_pb2, types_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.counting import calls, counting_server
from tests.faults.processes import Processes, run_bookkeeping, running
from tests.mesh import MeshClient, bearer
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

CHATS = 4
RECORD = {"content": "", "tool_calls": [{"name": "record", "arguments": {"note": "chat"}}]}


async def seed(client: MeshClient, token: str, count_file: Path) -> tuple[str, str]:
    """An agent whose `record` needs approval: (project id, agent ref)."""
    suffix = uuid.uuid4().hex[:8]
    metadata = bearer(token)
    agent_type = (
        await client.registry.CreateAgentType(
            reg.CreateAgentTypeRequest(
                agent_type=resources_pb2.AgentType(
                    name=f"careful {suffix}",
                    slug=f"careful-{suffix}",
                    primary_model="mock",
                    is_active=True,
                    mcp_servers=[counting_server(count_file)],
                    tool_permissions={"mcp:counting:record": types_pb2.TOOL_PERMISSION_ASK},
                )
            ),
            metadata=metadata,
        )
    ).agent_type
    project = (
        await client.registry.CreateProject(
            reg.CreateProjectRequest(project=resources_pb2.Project(name=f"p {suffix}", slug=f"p-{suffix}")),
            metadata=metadata,
        )
    ).project
    config = resources_pb2.AgentConfig()
    config.mock_responses.extend([RECORD, "recorded"])
    await client.registry.CreateAgent(
        reg.CreateAgentRequest(
            agent=resources_pb2.Agent(
                project_id=project.id, agent_type_id=agent_type.id, name="careful", config=config
            )
        ),
        metadata=metadata,
    )
    return project.id, f"{project.slug}/careful"


async def respond(client: MeshClient, token: str, project_id: str, request_id: str) -> list[run_pb2.RunEvent]:
    call = client.gateway.RespondToInput(
        gw.RespondToInputRequest(
            project_id=project_id,
            id=request_id,
            response=run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_APPROVE),
        ),
        metadata=bearer(token),
    )
    return [message.event async for message in call]


async def test_waiting_runs_survive_their_executors_and_each_approval_counts_once(
    postgres_database: str, tmp_path: Path
) -> None:
    await _in_a_mesh(postgres_database, tmp_path, _scenario)


async def _in_a_mesh(
    postgres_database: str,
    tmp_path: Path,
    scenario: Callable[[Processes, MeshClient, Path], Awaitable[None]],
) -> None:
    async with running(postgres_database, tmp_path) as mesh:
        client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
        try:
            await scenario(mesh, client, tmp_path / "calls.txt")
        finally:
            await client.close()


async def _scenario(mesh: Processes, client: MeshClient, count_file: Path) -> None:
    token = await client.login()
    project_id, agent = await seed(client, token, count_file)

    async def chat(session: str) -> list[run_pb2.RunEvent]:
        call = client.gateway.StreamChat(
            gw.StreamChatRequest(agent=agent, message="record it", session_id=session), metadata=bearer(token)
        )
        return [response.event async for response in call]

    sessions = [f"waiting-{n}" for n in range(CHATS)]
    suspended = await asyncio.gather(*(chat(session) for session in sessions))
    for events in suspended:
        assert events[-1].HasField("run_suspended"), events[-1]
    assert calls(count_file, "record") == 0  # nothing ran unapproved

    # Every executor that ran one of the runs dies; a new one takes the place of the dead (the
    # survivors, if any, are enough too: the waiting runs are nobody's).
    used = {events[0].run_started.executor_id for events in suspended}
    for executor_id in used:
        await mesh.executors[executor_id].kill()
    for executor_id in used:
        await mesh.executors[executor_id].start()

    # Two concurrent approvals per request: exactly one counts.
    for events in suspended:
        request_id = events[-1].run_suspended.request_ids[0]
        outcomes = await asyncio.gather(
            respond(client, token, project_id, request_id),
            respond(client, token, project_id, request_id),
            return_exceptions=True,
        )
        answered = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
        assert len(answered) == 1 and len(refused) == 1, outcomes
        assert refused[0].code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "answered" in (refused[0].details() or "")
        assert answered[0][-1].run_completed.content == "recorded", answered[0][-1]

    assert calls(count_file, "record") == CHATS  # once per chat, after its approval

    async def settled() -> bool:
        books = await run_bookkeeping(mesh.database_url)
        return books.settled

    await eventually(settled, timeout=30, what="no run left in flight or waiting in the registry's books")


async def test_a_waiting_delegation_tree_survives_its_executors_and_each_run_resumes_once(
    postgres_database: str, tmp_path: Path
) -> None:
    await _in_a_mesh(postgres_database, tmp_path, _tree_scenario)


async def coordinator(client: MeshClient, token: str, project_id: str, worker: str) -> str:
    """An agent that delegates to the careful one: its ref."""
    metadata = bearer(token)
    suffix = uuid.uuid4().hex[:8]
    agent_type = (
        await client.registry.CreateAgentType(
            reg.CreateAgentTypeRequest(
                agent_type=resources_pb2.AgentType(
                    name=f"coordinator {suffix}",
                    slug=f"coordinator-{suffix}",
                    primary_model="mock",
                    is_active=True,
                )
            ),
            metadata=metadata,
        )
    ).agent_type
    config = resources_pb2.AgentConfig()
    delegation = {
        "content": "",
        "tool_calls": [{"name": "delegate", "arguments": {"agent": "careful", "task": "record it"}}],
    }
    config.mock_responses.extend([delegation, "coordinated"])
    config.network_access.CopyFrom(types_pb2.StringList(values=["careful"]))
    await client.registry.CreateAgent(
        reg.CreateAgentRequest(
            agent=resources_pb2.Agent(
                project_id=project_id, agent_type_id=agent_type.id, name="coordinator", config=config
            )
        ),
        metadata=metadata,
    )
    return f"{worker.split('/')[0]}/coordinator"


async def _tree_scenario(mesh: Processes, client: MeshClient, count_file: Path) -> None:
    token = await client.login()
    project_id, worker = await seed(client, token, count_file)
    agent = await coordinator(client, token, project_id, worker)

    async def chat(session: str) -> list[run_pb2.RunEvent]:
        call = client.gateway.StreamChat(
            gw.StreamChatRequest(agent=agent, message="get it recorded", session_id=session),
            metadata=bearer(token),
        )
        return [response.event async for response in call]

    suspended = await asyncio.gather(*(chat(f"tree-{n}") for n in range(2)))
    for events in suspended:
        assert events[-1].HasField("run_suspended") and events[-1].run_id == events[0].run_id, events[-1]
    assert calls(count_file, "record") == 0

    # Every executor that ran a run of a tree — the coordinator's or the worker's — dies.
    used = {
        event.run_started.executor_id
        for events in suspended
        for event in events
        if event.HasField("run_started")
    }
    for executor_id in used:
        await mesh.executors[executor_id].kill()
    for executor_id in used:
        await mesh.executors[executor_id].start()

    for events in suspended:
        resumed = await respond(client, token, project_id, events[-1].run_suspended.request_ids[0])
        assert resumed[-1].run_id == events[0].run_id, resumed[-1]
        assert resumed[-1].run_completed.content == "coordinated", resumed[-1]
        answers = [e.delegation_response for e in resumed if e.HasField("delegation_response")]
        assert [a.content for a in answers] == ["recorded"]  # the worker's answer, once

    assert calls(count_file, "record") == 2  # once per chat, after its approval

    async def settled() -> bool:
        return (await run_bookkeeping(mesh.database_url)).settled

    await eventually(settled, timeout=30, what="no run left in flight or waiting in the registry's books")
