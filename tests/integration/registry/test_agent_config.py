"""An agent's configuration over gRPC: updates with a field mask, resolution of the type and the
agent's overrides into what an executor runs, the spec revision that tells executors to reload,
and the executor pool that runs them."""

from __future__ import annotations

import grpc
from google.protobuf import field_mask_pb2, json_format, struct_pb2

from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.errors import NotFound
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import (
    Api,
    Caller,
    bearer,
    list_value,
    rpc_error,
    strings,
    violation_fields,
)

GRPC = grpc.StatusCode


async def test_update_agent_config(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    await api.agent(owner, project, "worker")
    agent = await api.agent(
        owner, project, "boss", config=res.AgentConfig(instructions="Lead.", max_steps=3, tools=strings("t1"))
    )
    md = owner.metadata

    async def update(config: res.AgentConfig, *paths: str, agent_id: str = agent.id) -> res.Agent:
        request = pb.UpdateAgentRequest(
            agent=res.Agent(project_id=project.id, id=agent_id, config=config),
            update_mask=field_mask_pb2.FieldMask(paths=paths),
        )
        return (await stub.UpdateAgent(request, metadata=md)).agent

    changed = await update(
        res.AgentConfig(network_access=strings("worker"), instructions="ignored"), "config.network_access"
    )
    assert changed.config.instructions == "Lead."
    assert changed.config.max_steps == 3
    assert list(changed.config.network_access.values) == ["worker"]
    # Named in the mask but not set: the override is cleared (the type's value applies).
    cleared = await update(res.AgentConfig(), "config.instructions")
    assert not cleared.config.HasField("instructions")
    assert cleared.config.max_steps == 3
    # "config" replaces all overrides.
    replaced = await update(res.AgentConfig(primary_model="openai/gpt-4o"), "config")
    assert replaced.config == res.AgentConfig(primary_model="openai/gpt-4o")

    bad = await rpc_error(update(res.AgentConfig(network_access=strings("ghost")), "config.network_access"))
    assert violation_fields(bad) == {"agent.config.network_access"}
    bad_mask = await rpc_error(update(res.AgentConfig(), "name"))
    assert violation_fields(bad_mask) == {"update_mask"}
    empty_mask = await rpc_error(update(res.AgentConfig()))
    assert violation_fields(empty_mask) == {"update_mask"}
    got = await stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    assert got.agent == replaced

    await stub.DeleteAgent(pb.DeleteAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    terminated = await rpc_error(update(res.AgentConfig(instructions="x"), "config.instructions"))
    assert (terminated.code, terminated.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_TERMINATED")


async def test_resolve_merges_type_and_overrides(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, codec: TokenCodec
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    params = struct_pb2.Struct()
    params.update({"temperature": 0.1, "max_tokens": 256})
    agent_type = await api.agent_type(
        description="Plans work",
        expertise=["planning"],
        personality_prompt="Type prompt",
        primary_model="openai/gpt-4o-mini",
        fallback_models=["mock"],
        model_params=params,
        tools=["exit_loop"],
        mcp_servers=[res.McpServer(name="fs", transport="stdio", command="mcp-fs")],
        kind=res.AGENT_KIND_LLM,
        sub_agents=[],
        max_steps=6,
        max_iterations=2,
    )
    await api.agent(owner, project, "worker", agent_type=agent_type)
    plain = await client.resolve_agent(project.slug, "worker", metadata=owner.metadata)
    assert (plain.instructions, plain.primary_model, plain.max_steps, plain.max_iterations) == (
        "Type prompt",
        "openai/gpt-4o-mini",
        6,
        2,
    )
    assert json_format.MessageToDict(plain.model_params) == {"temperature": 0.1, "max_tokens": 256}
    assert (list(plain.tools), list(plain.network_access), list(plain.mock_responses.values)) == (
        ["exit_loop"],
        [],
        [],
    )
    assert (plain.project_slug, plain.description, list(plain.expertise)) == (
        project.slug,
        "Plans work",
        ["planning"],
    )
    assert [s.name for s in plain.mcp_servers] == ["fs"]
    assert list(plain.fallback_models) == ["mock"]
    assert plain.kind == res.AGENT_KIND_LLM

    overrides = struct_pb2.Struct()
    overrides.update({"temperature": 0.9})
    mock = list_value("plain answer", {"content": "", "tool_calls": [{"name": "exit_loop", "arguments": {}}]})
    boss = await api.agent(
        owner,
        project,
        "boss",
        agent_type=agent_type,
        config=res.AgentConfig(
            instructions="Boss prompt",
            primary_model="mock",
            model_params=overrides,
            max_steps=2,
            max_iterations=0,
            tools=strings(),
            sub_agents=strings("worker"),
            network_access=strings("worker"),
            mock_responses=mock,
        ),
    )
    spec = await client.resolve_agent(project.slug, "boss", metadata=owner.metadata)
    assert spec.agent == boss
    assert (spec.instructions, spec.primary_model, spec.max_steps, spec.max_iterations) == (
        "Boss prompt",
        "mock",
        2,
        0,
    )
    assert json_format.MessageToDict(spec.model_params) == {"temperature": 0.9}
    assert (list(spec.tools), list(spec.sub_agents), list(spec.network_access)) == (
        [],
        ["worker"],
        ["worker"],
    )
    assert json_format.MessageToDict(spec.mock_responses) == json_format.MessageToDict(mock)

    # The system principal may resolve too; others learn nothing.
    system = await client.resolve_agent(project.slug, "boss", metadata=bearer(codec.system_token()))
    assert system == spec
    stranger = await api.sign_up()
    for slug, name in ((project.slug, "boss"), (project.slug, "ghost"), ("no-such-project", "boss")):
        try:
            await client.resolve_agent(slug, name, metadata=stranger.metadata)
            raise AssertionError("resolved")
        except NotFound:
            pass
    try:
        await client.resolve_agent(project.slug, "ghost", metadata=owner.metadata)
        raise AssertionError("resolved")
    except NotFound as error:
        assert error.reason == "AGENT_NOT_FOUND"


async def test_executor_pool(client: RegistryClient, api: Api, codec: TokenCodec) -> None:
    system = bearer(codec.system_token())
    registered = await client.register_executor("exec-1", "127.0.0.1:7001", metadata=system)
    assert (registered.id, registered.address) == ("exec-1", "127.0.0.1:7001")
    await client.register_executor("exec-2", "127.0.0.1:7002", metadata=system)
    # A heartbeat refreshes, and may move the address.
    await client.register_executor("exec-1", "127.0.0.1:7003", metadata=system)
    executors = await client.list_executors(metadata=system)
    assert [(e.id, e.address) for e in executors] == [
        ("exec-1", "127.0.0.1:7003"),
        ("exec-2", "127.0.0.1:7002"),
    ]
    root = await api.root()
    assert len(await client.list_executors(metadata=root.metadata)) == 2

    user = await api.sign_up()
    for call in (
        client.register_executor("evil", "10.0.0.1:1", metadata=user.metadata),
        client.register_executor("evil", "10.0.0.1:1", metadata=root.metadata),
        client.list_executors(metadata=user.metadata),
    ):
        error = await rpc_error(call)
        assert error.code == GRPC.PERMISSION_DENIED
    bad = await rpc_error(client.register_executor("", "", metadata=system))
    assert violation_fields(bad) == {"executor.id", "executor.address"}


async def test_the_spec_revision_moves_only_when_the_spec_may_change(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type(personality_prompt="Before")
    agent = await api.agent(owner, project, "worker", agent_type=agent_type)
    md = owner.metadata

    async def resolved() -> str:
        return (await client.resolve_agent(project.slug, "worker", metadata=md)).revision

    async def started(run_id: str) -> str:
        revision = (await client.start_agent_run(agent.id, run_id, metadata=md)).spec_revision
        await client.finish_agent_run(agent.id, run_id, completed=True, tokens_used=5, metadata=md)
        return revision

    first = await resolved()
    assert first and await started("a") == first
    # Runs, usage and pausing are not part of the spec.
    ids = {"project_id": project.id, "id": agent.id}
    await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)
    await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)
    assert await resolved() == first and await started("b") == first

    overrides = res.Agent(project_id=project.id, id=agent.id, config=res.AgentConfig(instructions="Now"))
    mask = field_mask_pb2.FieldMask(paths=["config.instructions"])
    await stub.UpdateAgent(pb.UpdateAgentRequest(agent=overrides, update_mask=mask), metadata=md)
    second = await started("c")
    assert second != first and await resolved() == second

    root = await api.root()
    changed_type = res.AgentType(id=agent_type.id, personality_prompt="After")
    await stub.UpdateAgentType(
        pb.UpdateAgentTypeRequest(
            agent_type=changed_type, update_mask=field_mask_pb2.FieldMask(paths=["personality_prompt"])
        ),
        metadata=root.metadata,
    )
    third = await resolved()
    assert third not in (first, second) and await started("d") == third
