"""Runs waiting for a person hold nothing, so no executor's death touches them: the services run as
separate processes on PostgreSQL with two executors; several chats each ask for approval of a
non-idempotent MCP tool (`record`, which counts its own calls in a file) and suspend; every
executor that ran one is SIGKILLed; a fresh executor takes the place of the dead. Each approval,
sent as two concurrent responses, counts once (the other is refused naming the first), resumes its
run on a live executor, and `record` runs exactly once per chat; every session ends with exactly
one final event, and no agent is left `working` or `waiting`."""

from __future__ import annotations

import asyncio
import uuid
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
    count_file = tmp_path / "calls.txt"
    async with running(postgres_database, tmp_path) as mesh:
        client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
        try:
            await _scenario(mesh, client, count_file)
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
