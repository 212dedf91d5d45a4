"""The gateway's public gRPC API: the registry's and the memory service's RPCs forwarded under the
policy table, and Chat / StreamChat streaming every step, the delegated worker's included."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.policy import RPC_POLICY
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ireg
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as ireg_grpc
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentmesh.memory.v1 import resources_pb2 as mem_resources
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import TokenCodec
from tests.integration.gateway.support import Api, suffix
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, bearer
from tests.polling import eventually


@pytest_asyncio.fixture(loop_scope="package")
async def channel(mesh: Mesh) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield channel


def reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return ""


async def test_every_served_rpc_has_a_policy(channel: grpc.aio.Channel, once: None) -> None:
    """Enumerates what the gateway's gRPC port actually serves (through reflection)."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def ask(request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
        responses = [response async for response in stub.ServerReflectionInfo(iter([request]))]
        assert len(responses) == 1
        return responses[0]

    services = (await ask(reflection_pb2.ServerReflectionRequest(list_services=""))).list_services_response
    names = {service.name for service in services.service}
    assert {
        "agentmesh.gateway.v1.GatewayService",
        "agentmesh.registry.v1.RegistryService",
        "agentmesh.memory.v1.MemoryService",
        "grpc.health.v1.Health",
    } <= names
    methods: list[str] = []
    for name in sorted(names):
        found = await ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol=name))
        for raw in found.file_descriptor_response.file_descriptor_proto:
            file = descriptor_pb2.FileDescriptorProto.FromString(raw)
            for service in file.service:
                if f"{file.package}.{service.name}" == name:
                    methods += [f"/{name}/{method.name}" for method in service.method]
    assert len(methods) > 40
    missing = [method for method in methods if method not in RPC_POLICY]
    assert missing == []


async def test_reflection_v1_is_served_beside_v1alpha(channel: grpc.aio.Channel) -> None:
    """grpcurl and buf curl ask for grpc.reflection.v1 first; its messages are v1alpha's on the wire."""
    info = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="agentmesh.gateway.v1.GatewayService"),
    ]
    listed, described = [response async for response in info(iter(requests))]
    names = {service.name for service in listed.list_services_response.service}
    assert {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} <= names
    assert "agentmesh.gateway.v1.GatewayService" in names
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in described.file_descriptor_response.file_descriptor_proto
    ]
    assert any(service.name == "GatewayService" for file in files for service in file.service)


async def test_registry_rpcs_through_the_gateway(channel: grpc.aio.Channel) -> None:
    registry = reg_grpc.RegistryServiceStub(channel)
    email = f"grpc-{suffix()}@example.com"
    await registry.RegisterUser(reg.RegisterUserRequest(email=email, password="a-long-password-1"))
    tokens = (await registry.Login(reg.LoginRequest(email=email, password="a-long-password-1"))).tokens
    me = await registry.GetCurrentUser(reg.GetCurrentUserRequest(), metadata=bearer(tokens.access_token))
    assert me.user.email == email

    project = (
        await registry.CreateProject(
            reg.CreateProjectRequest(project=resources_pb2.Project(name="g", slug=f"g-{suffix()}")),
            metadata=bearer(tokens.access_token),
        )
    ).project
    got = await registry.GetProject(
        reg.GetProjectRequest(id=project.id), metadata=bearer(tokens.access_token)
    )
    assert got.project.slug == project.slug

    with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
        await registry.ListProjects(reg.ListProjectsRequest())
    assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED

    with pytest.raises(grpc.aio.AioRpcError) as not_superuser:
        await registry.CreateAgentType(
            reg.CreateAgentTypeRequest(agent_type=resources_pb2.AgentType(name="t", slug=f"t-{suffix()}")),
            metadata=bearer(tokens.access_token),
        )
    assert not_superuser.value.code() == grpc.StatusCode.PERMISSION_DENIED

    # Executors' RPCs are not for users, even about their own agents: the gateway does not serve the
    # internal packages at all (whatever the token, a system one included).
    internal = ireg_grpc.RegistryInternalServiceStub(channel)
    for call, request in [
        (internal.ResolveAgent, ireg.ResolveAgentRequest(project_slug=project.slug, agent_name="x")),
        (internal.StartAgentRun, ireg.StartAgentRunRequest(agent_id="x", run_id="y")),
        (internal.FinishAgentRun, ireg.FinishAgentRunRequest(agent_id="x", run_id="y")),
        (internal.RegisterExecutor, ireg.RegisterExecutorRequest()),
        (internal.ListExecutors, ireg.ListExecutorsRequest()),
    ]:
        for token in (tokens.access_token, TokenCodec(JWT_SECRET).system_token()):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(request, metadata=bearer(token))
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, call

    # Errors pass through with their reason and field violations.
    with pytest.raises(grpc.aio.AioRpcError) as taken:
        await registry.CreateProject(
            reg.CreateProjectRequest(project=resources_pb2.Project(name="g", slug=project.slug)),
            metadata=bearer(tokens.access_token),
        )
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert reason(taken.value) == "SLUG_TAKEN"


async def test_memory_rpcs_are_for_the_project_owner(channel: grpc.aio.Channel, api: Api, mesh: Mesh) -> None:
    agent = await api.agent(mock_responses=["stored"])
    other = await api.user()
    session_id = f"grpc-mem-{suffix()}"
    response = await api.http.post(
        f"{agent.base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "keep this"}], "session_id": session_id},
        headers=agent.owner.headers,
    )
    assert response.status_code == 200
    memory = mem_grpc.MemoryServiceStub(channel)
    owner = bearer(agent.owner.token)

    listed = await memory.ListEvents(mem.ListEventsRequest(session_id=session_id), metadata=owner)
    assert [e.content for e in listed.events] == ["keep this", "stored"]
    session = await memory.GetSession(mem.GetSessionRequest(session_id=session_id), metadata=owner)
    assert session.session.project_id == agent.project_id
    sessions = await memory.ListSessions(mem.ListSessionsRequest(project_id=agent.project_id), metadata=owner)
    assert [s.id for s in sessions.sessions] == [session_id]
    watched = memory.WatchEvents(mem.WatchEventsRequest(session_id=session_id), metadata=owner)
    first = await anext(aiter(watched))
    watched.cancel()
    assert first.event.seq == 1

    appended = await memory.AppendEvents(
        mem.AppendEventsRequest(
            session_id=session_id,
            project_id=agent.project_id,
            events=[
                mem.NewEvent(agent="client", event_type=mem_resources.EVENT_TYPE_USER_MESSAGE, content="x")
            ],
        ),
        metadata=owner,
    )
    assert appended.last_seq == 3

    stranger = bearer(other.token)
    for call, request in [
        (memory.ListEvents, mem.ListEventsRequest(session_id=session_id)),
        (memory.ListEvents, mem.ListEventsRequest(project_id=agent.project_id, agent=agent.name)),
        (memory.GetSession, mem.GetSessionRequest(session_id=session_id)),
        (memory.ListSessions, mem.ListSessionsRequest(project_id=agent.project_id)),
        (memory.GetRetentionPolicy, mem.GetRetentionPolicyRequest(project_id=agent.project_id)),
        (
            memory.SetRetentionPolicy,
            mem.SetRetentionPolicyRequest(policy=mem_resources.RetentionPolicy(project_id=agent.project_id)),
        ),
        (
            memory.AppendEvents,
            mem.AppendEventsRequest(
                session_id=session_id,
                project_id=agent.project_id,
                events=[
                    mem.NewEvent(agent="x", event_type=mem_resources.EVENT_TYPE_USER_MESSAGE, content="y")
                ],
            ),
        ),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await call(request, metadata=stranger)
        assert denied.value.code() == grpc.StatusCode.NOT_FOUND, (call, denied.value.details())
    with pytest.raises(grpc.aio.AioRpcError) as denied:
        await anext(
            aiter(memory.WatchEvents(mem.WatchEventsRequest(session_id=session_id), metadata=stranger))
        )
    assert denied.value.code() == grpc.StatusCode.NOT_FOUND
    # An unknown session looks the same as a foreign one.
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await memory.GetSession(mem.GetSessionRequest(session_id="no-such-session"), metadata=stranger)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert unknown.value.details() == denied.value.details().replace(session_id, "no-such-session")

    # A superuser sees everything.
    admin = (
        await reg_grpc.RegistryServiceStub(channel).Login(
            reg.LoginRequest(email=SUPERUSER_EMAIL, password=SUPERUSER_PASSWORD)
        )
    ).tokens.access_token
    assert (
        await memory.GetSession(mem.GetSessionRequest(session_id=session_id), metadata=bearer(admin))
    ).session


async def test_stream_chat_carries_the_workers_steps_tagged_with_their_path(
    channel: grpc.aio.Channel, api: Api
) -> None:
    owner = await api.user()
    worker = await api.agent(owner, name="worker", mock_responses=["Task 7 is done."])
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project={"id": worker.project_id, "slug": worker.project_slug},
        network_access=["worker"],
        mock_responses=[
            {
                "content": "",
                "tool_calls": [{"name": "delegate", "arguments": {"agent": "worker", "task": "do 7"}}],
            },
            "The worker did task 7.",
        ],
    )
    gateway = gw_grpc.GatewayServiceStub(channel)
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, message="get 7 done"), metadata=bearer(owner.token)
    )
    events = [response.event async for response in call]
    metadata = dict(await call.initial_metadata())
    assert metadata["x-session-id"] == events[0].session_id
    below = [e for e in events if e.delegation_path]
    assert {tuple(e.delegation_path) for e in below} == {("coordinator",)}
    assert "".join(e.text_delta.text for e in below if e.HasField("text_delta")) == "Task 7 is done."
    assert events[-1].run_completed.content == "The worker did task 7."

    # The OpenAI face shows the coordinator's answer only.
    completion = await api.http.post(
        "/v1/chat/completions",
        json={"model": coordinator.model, "messages": [{"role": "user", "content": "again"}], "stream": True},
        headers=owner.headers,
    )
    text = "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        for line in completion.text.splitlines()
        if line.startswith("data: {") and '"choices": [{' in line
    )
    assert text == "The worker did task 7."

    unary = await gateway.Chat(
        gw.ChatRequest(agent=coordinator.model, message="once more"), metadata=bearer(owner.token)
    )
    assert unary.content == "The worker did task 7."


async def test_grpc_cancel_stops_the_run_and_the_agent_goes_idle(channel: grpc.aio.Channel, api: Api) -> None:
    agent = await api.agent(mock_responses=[{"content": "slow " * 200, "delay_seconds": 0.25}])
    gateway = gw_grpc.GatewayServiceStub(channel)
    session_id = f"cancel-grpc-{suffix()}"
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=agent.model, message="take your time", session_id=session_id),
        metadata=bearer(agent.owner.token),
    )
    async for response in call:
        if response.event.HasField("text_delta"):
            break
    assert await api.status(agent) == "working"
    call.cancel()

    async def idle() -> bool:
        return await api.status(agent) == "idle"

    await eventually(idle, what="the agent is idle again")
    events = await api.session_events(agent, session_id)
    assert events[-1]["event_type"] == "error"
    assert events[-1]["metadata"].get("cancelled") is True
    assert "agent_response" not in [e["event_type"] for e in events]
