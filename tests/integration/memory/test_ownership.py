"""Memory checks ownership itself: a mesh service with a valid service credential,
acting for user B (B's token), is refused user A's session on every MemoryService RPC — NOT_FOUND,
exactly as for a session that does not exist — whatever the service in between decided. A, a
superuser and the system are served. A's session is made the normal way (a chat through the
gateway, recorded by the executor for A), on both databases."""

from __future__ import annotations

import uuid

import grpc
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentmesh.memory.v1 import resources_pb2 as mres
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.bearer import authorized_channel, system_token
from tests.mesh import MeshClient, bearer

PASSWORD = "correct horse battery"


async def _user(client: MeshClient) -> str:
    email = f"u-{uuid.uuid4().hex[:8]}@example.com"
    await client.registry.RegisterUser(
        reg.RegisterUserRequest(email=email, password=PASSWORD, first_name="U", last_name="Ser")
    )
    return await client.login(email, PASSWORD)


async def _chat_as_a_user(client: MeshClient) -> tuple[str, str, str]:
    """A user's token, project id and session id, the session recorded by a chat."""
    agent_type = (
        await client.registry.CreateAgentType(
            reg.CreateAgentTypeRequest(
                agent_type=resources_pb2.AgentType(
                    name=f"t {uuid.uuid4().hex[:8]}",
                    personality_prompt="You are a test agent.",
                    primary_model="mock",
                    kind=resources_pb2.AGENT_KIND_LLM,
                    max_steps=3,
                    is_active=True,
                )
            ),
            metadata=bearer(await client.login()),
        )
    ).agent_type
    owner = await _user(client)
    project = (
        await client.registry.CreateProject(
            reg.CreateProjectRequest(
                project=resources_pb2.Project(name="mine", slug=f"a-{uuid.uuid4().hex[:8]}")
            ),
            metadata=bearer(owner),
        )
    ).project
    config = resources_pb2.AgentConfig()
    config.mock_responses.values.add().string_value = "hello A"
    await client.registry.CreateAgent(
        reg.CreateAgentRequest(
            agent=resources_pb2.Agent(
                project_id=project.id, agent_type_id=agent_type.id, name="assistant", config=config
            )
        ),
        metadata=bearer(owner),
    )
    answer = await client.gateway.Chat(
        gw.ChatRequest(agent=f"{project.slug}/assistant", message="secret plans"), metadata=bearer(owner)
    )
    return owner, project.id, answer.session_id


def _requests(session_id: str, project_id: str) -> dict[str, object]:
    """One request of every MemoryService RPC aimed at the session (or its project); each named
    twice where a session may be named without its project."""
    return {
        "GetSession": [
            pb.GetSessionRequest(session_id=session_id, project_id=project_id),
            pb.GetSessionRequest(session_id=session_id),
        ],
        "ListEvents": [
            pb.ListEventsRequest(session_id=session_id, project_id=project_id),
            pb.ListEventsRequest(session_id=session_id),
            pb.ListEventsRequest(project_id=project_id),
        ],
        "WatchEvents": [
            pb.WatchEventsRequest(session_id=session_id, project_id=project_id),
            pb.WatchEventsRequest(session_id=session_id),
        ],
        "AppendEvents": [
            pb.AppendEventsRequest(
                session_id=sid,
                project_id=project_id,
                events=[
                    pb.NewEvent(agent="intruder", event_type=mres.EVENT_TYPE_USER_MESSAGE, content="injected")
                ],
            )
            for sid in (session_id, "a-new-session")
        ],
        "ResetSessionContext": [pb.ResetSessionContextRequest(session_id=session_id, project_id=project_id)],
        "ListSessions": [pb.ListSessionsRequest(project_id=project_id)],
        "GetRetentionPolicy": [pb.GetRetentionPolicyRequest(project_id=project_id)],
        "SetRetentionPolicy": [
            pb.SetRetentionPolicyRequest(
                policy=mres.RetentionPolicy(project_id=project_id, max_age_seconds=1)
            )
        ],
    }


async def _call(stub: pb_grpc.MemoryServiceStub, name: str, request: object) -> object:
    if name == "WatchEvents":
        call = stub.WatchEvents(request, timeout=30)
        async for response in call:
            call.cancel()
            return response
        return None
    return await getattr(stub, name)(request, timeout=30)


async def test_a_service_acting_for_another_user_is_refused_the_session(
    mesh: Mesh, client: MeshClient
) -> None:
    owner, project_id, session_id = await _chat_as_a_user(client)
    intruder = await _user(client)
    memory_address = mesh.services["memory"].address

    async with authorized_channel(memory_address, intruder) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        for name, requests in _requests(session_id, project_id).items():
            for request in requests:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await _call(stub, name, request)
                assert refused.value.code() == grpc.StatusCode.NOT_FOUND, (name, request, refused.value)
                assert "secret plans" not in (refused.value.details() or "")

    # Nothing the intruder tried changed the session; its owner, a superuser and the system read it.
    for token in (owner, await client.login(), system_token()):
        async with authorized_channel(memory_address, token) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            listed = await stub.ListEvents(pb.ListEventsRequest(session_id=session_id, project_id=project_id))
            contents = [event.content for event in listed.events]
            assert "secret plans" in contents and "hello A" in contents and "x" not in contents
            sessions = await stub.ListSessions(pb.ListSessionsRequest(project_id=project_id))
            assert [session.id for session in sessions.sessions] == [session_id]
