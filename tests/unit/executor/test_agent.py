"""An agent's cache signature changes exactly when its behaviour may: model, provider endpoint,
API key (all of it, not a prefix), tools, instructions, network access."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from agentmesh.executor.agents.cache import SessionScope
from agentmesh.executor.agents.runtime import AgentBuilder
from agentmesh.executor.providers.factory import ModelFactory
from agentmesh.executor.settings import ExecutorSettings, ProviderSettings
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition

KEY = "sk-test-" + "a" * 40


def settings(key: str = KEY, base_url: str = "http://127.0.0.1:9/v1") -> ExecutorSettings:
    return ExecutorSettings(
        openai_api_key=SecretStr(key),
        openai_base_url=base_url,
        providers={"ollama": ProviderSettings(base_url="http://127.0.0.1:11434/v1")},
    )


def spec(**changes) -> resources_pb2.AgentSpec:
    agent_spec = resources_pb2.AgentSpec(
        agent=resources_pb2.Agent(id="agent-1", name="helper", project_id="p1"),
        project_slug="p",
        kind=resources_pb2.AGENT_KIND_LLM,
        instructions="Be helpful.",
        primary_model="openai/gpt-4o-mini",
        tools=["get_current_time"],
        network_access=["worker"],
        max_steps=5,
    )
    for name, value in changes.items():
        field = getattr(agent_spec, name)
        if isinstance(value, list):
            del field[:]
            field.extend(value)
        else:
            setattr(agent_spec, name, value)
    return agent_spec


async def signature(agent_spec: resources_pb2.AgentSpec, executor: ExecutorSettings | None = None) -> str:
    builder = AgentBuilder(ModelFactory(executor or settings()))
    digest, _ = await builder.plan(agent_spec)
    return digest


async def test_the_same_agent_signs_the_same() -> None:
    assert await signature(spec()) == await signature(spec())


@pytest.mark.parametrize(
    "change",
    [
        {"primary_model": "openai/gpt-4o"},
        {"primary_model": "ollama/smollm2:135m"},
        {"fallback_models": ["openai/gpt-4o"]},
        {"tools": ["get_current_time", "exit_loop"]},
        {"instructions": "Be brief."},
        {"network_access": ["worker", "critic"]},
        {"max_steps": 6},
    ],
)
async def test_a_behaviour_change_changes_the_signature(change: dict) -> None:
    assert await signature(spec(**change)) != await signature(spec())


async def test_the_whole_api_key_counts_not_a_prefix() -> None:
    same_prefix = KEY[:-1] + "b"
    assert await signature(spec(), settings(key=same_prefix)) != await signature(spec())
    assert await signature(spec(), settings(base_url="http://elsewhere/v1")) != await signature(spec())


async def test_the_api_key_never_appears_in_what_is_built(tmp_path) -> None:
    builder = AgentBuilder(ModelFactory(settings()))
    digest, plan = await builder.plan(spec())
    assert KEY not in repr(plan) and KEY not in digest and KEY not in str(plan.signature())
    runtime = await builder.build(spec(), digest, plan, SessionScope("s"))
    assert KEY not in repr(runtime)


async def test_a_key_file_is_a_secret_reference(tmp_path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    executor = ExecutorSettings(
        providers={"vllm": ProviderSettings(base_url="http://127.0.0.1:8000/v1", api_key_file=key_file)}
    )
    plan = await ModelFactory(executor).plan(spec(primary_model="vllm/qwen"))
    assert plan.targets[0].api_key == KEY
    first = await signature(spec(primary_model="vllm/qwen"), executor)
    key_file.write_text(KEY + "x")
    assert await signature(spec(primary_model="vllm/qwen"), executor) != first


async def test_mock_responses_select_the_mock_model_whatever_the_model() -> None:
    agent_spec = spec(primary_model="openai/gpt-4o")
    agent_spec.mock_responses.extend(["scripted"])
    plan = await ModelFactory(settings()).plan(agent_spec)
    assert plan.is_mock and list(plan.mock_responses) == ["scripted"]


async def test_unknown_providers_and_tools_are_clear_errors() -> None:
    with pytest.raises(FailedPrecondition, match="provider 'nope'") as raised:
        await ModelFactory(settings()).plan(spec(primary_model="nope/x"))
    assert raised.value.reason == "MODEL_UNAVAILABLE"
    builder = AgentBuilder(ModelFactory(settings()))
    bad = spec(tools=["no_such_tool"])
    digest, plan = await builder.plan(bad)
    with pytest.raises(FailedPrecondition, match="no_such_tool") as raised:
        await builder.build(bad, digest, plan, SessionScope("s"))
    assert raised.value.reason == "UNKNOWN_TOOL"


def test_providers_say_what_keeps_them_from_answering(tmp_path) -> None:
    """What an executor reports to the registry, so declared agents are checked against it."""
    readable = tmp_path / "key"
    readable.write_text(KEY)
    executor = ExecutorSettings(
        openai_api_key=SecretStr(""),
        providers={
            "ollama": ProviderSettings(base_url="http://127.0.0.1:11434/v1"),
            "vllm": ProviderSettings(base_url="http://127.0.0.1:8000/v1", api_key_file=readable),
            "gone": ProviderSettings(base_url="https://api.openai.com/v1", api_key_file=tmp_path / "missing"),
        },
    )
    statuses = dict(ModelFactory(executor).providers())
    assert statuses == {
        "mock": "",
        "gone": "the executors cannot read the key file of provider 'gone'",
        "ollama": "",  # keyless servers answer without a key
        "openai": "the executors have no API key for provider 'openai': set AGENTMESH_OPENAI_API_KEY on them",
        "vllm": "",
    }
    assert KEY not in str(statuses)
    assert dict(ModelFactory(settings()).providers())["openai"] == ""


def test_the_builder_names_its_function_tools() -> None:
    assert {"get_current_time", "exit_loop"} <= set(AgentBuilder(ModelFactory(settings())).tool_names)
