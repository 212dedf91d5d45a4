"""Declaring an agent or an agent type is checked against what the running executors offer, so a
mistake shows before a chat fails: a model whose provider no executor has or can use, a tool no
executor offers. The registry warns (naming the fix) and still stores the declaration: the pool
changes."""

from __future__ import annotations

from google.protobuf import field_mask_pb2

from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, bearer, strings

NO_KEY = "the executors have no API key for provider 'openai': set AGENTMESH_OPENAI_API_KEY on them"


async def _pool(client: RegistryClient, codec: TokenCodec, *, openai_problem: str = NO_KEY) -> None:
    """Two executors: both offer get_current_time and exit_loop; one also has an `ollama` provider."""
    system = bearer(codec.system_token())
    await client.register_executor(
        "exec-a",
        "127.0.0.1:7001",
        tools=["exit_loop", "get_current_time"],
        model_providers=[("mock", ""), ("openai", openai_problem)],
        metadata=system,
    )
    await client.register_executor(
        "exec-b",
        "127.0.0.1:7002",
        tools=["exit_loop", "get_current_time"],
        model_providers=[("mock", ""), ("ollama", ""), ("openai", openai_problem)],
        metadata=system,
    )


async def _create_type(
    stub: pb_grpc.RegistryServiceStub, api: Api, **fields: object
) -> pb.CreateAgentTypeResponse:
    root = await api.root()
    values: dict[str, object] = {"name": "Checked", "slug": "checked", "is_active": True, **fields}
    request = pb.CreateAgentTypeRequest(agent_type=res.AgentType(**values))
    return await stub.CreateAgentType(request, metadata=root.metadata)


async def test_the_pool_reports_what_it_offers(client: RegistryClient, codec: TokenCodec) -> None:
    await _pool(client, codec)
    executors = await client.list_executors(metadata=bearer(codec.system_token()))
    by_id = {e.id: e for e in executors}
    assert list(by_id["exec-b"].tools) == ["exit_loop", "get_current_time"]
    assert [(p.name, p.problem) for p in by_id["exec-b"].model_providers] == [
        ("mock", ""),
        ("ollama", ""),
        ("openai", NO_KEY),
    ]


async def test_a_misspelled_provider_and_tool_are_named_with_the_fix(
    stub: pb_grpc.RegistryServiceStub, client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    await _pool(client, codec)
    created = await _create_type(stub, api, primary_model="opneai/gpt-4o-mini", tools=["get_curent_time"])
    assert created.agent_type.id, "a warning does not refuse the declaration"
    model_warning, tool_warning = created.warnings
    assert "model 'opneai/gpt-4o-mini'" in model_warning
    assert "no running executor has the provider 'opneai'" in model_warning
    assert "did you mean 'openai'?" in model_warning
    assert "mock, ollama, openai" in model_warning
    assert "tool 'get_curent_time' is not offered by any running executor" in tool_warning
    assert "did you mean 'get_current_time'?" in tool_warning


async def test_a_provider_without_a_key_names_the_setting(
    stub: pb_grpc.RegistryServiceStub, client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    await _pool(client, codec)
    created = await _create_type(stub, api, primary_model="gpt-4o-mini", fallback_models=["ollama/smollm2"])
    # A name without a provider runs on openai; ollama is ready on one executor.
    assert list(created.warnings) == [f"model 'gpt-4o-mini': {NO_KEY}"]


async def test_what_the_pool_serves_gets_no_warning(
    stub: pb_grpc.RegistryServiceStub, client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    await _pool(client, codec, openai_problem="")
    created = await _create_type(
        stub, api, primary_model="openai/gpt-4o-mini", fallback_models=["mock"], tools=["get_current_time"]
    )
    assert list(created.warnings) == []


async def test_an_agent_is_checked_with_its_overrides(
    stub: pb_grpc.RegistryServiceStub, client: RegistryClient, api: Api, codec: TokenCodec
) -> None:
    await _pool(client, codec)
    agent_type = (await _create_type(stub, api, primary_model="mock")).agent_type
    owner = await api.sign_up()
    project = await api.project(owner)

    request = pb.CreateAgentRequest(
        agent=res.Agent(
            project_id=project.id,
            agent_type_id=agent_type.id,
            name="helper",
            config=res.AgentConfig(primary_model="vllm/llama", tools=strings("search")),
        )
    )
    created = await stub.CreateAgent(request, metadata=owner.metadata)
    model_warning, tool_warning = created.warnings
    assert model_warning.startswith("model 'vllm/llama': no running executor has the provider 'vllm'")
    assert tool_warning.startswith("tool 'search' is not offered by any running executor")

    # Dropping the overrides (the type's mock model, no tools) clears the warnings.
    update = pb.UpdateAgentRequest(
        agent=res.Agent(project_id=project.id, id=created.agent.id),
        update_mask=field_mask_pb2.FieldMask(paths=["config.primary_model", "config.tools"]),
    )
    assert list((await stub.UpdateAgent(update, metadata=owner.metadata)).warnings) == []

    # Scripted answers need no provider: only the tool is left to warn about.
    scripted = pb.UpdateAgentRequest(
        agent=res.Agent(
            project_id=project.id,
            id=created.agent.id,
            config=res.AgentConfig(primary_model="openai/gpt-4o", tools=strings("search")),
        ),
        update_mask=field_mask_pb2.FieldMask(paths=["config.primary_model", "config.tools"]),
    )
    scripted.agent.config.mock_responses.append("scripted")
    scripted.update_mask.paths.append("config.mock_responses")
    warnings = (await stub.UpdateAgent(scripted, metadata=owner.metadata)).warnings
    assert len(warnings) == 1 and warnings[0].startswith("tool 'search' is not offered")


async def test_with_no_executor_running_it_says_nothing_was_checked(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    created = await _create_type(stub, api, primary_model="opneai/gpt-4o-mini")
    assert list(created.warnings) == [
        "no executor is running: models and tools will be checked when one reports in"
    ]
