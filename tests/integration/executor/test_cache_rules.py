"""The agent cache's rules (after the Hermes gateway's), each shown from outside:
the executor's GetStats counters, the gateway's operations, and the requests a scripted
OpenAI-compatible server receives.

- the same config reuses the runtime across a session's messages;
- a change of model, provider (with its base URL), tools, instructions, network access or API key
  (the whole key: two keys sharing a prefix do not collide) rebuilds it;
- per-message settings (temperature, max tokens, reasoning effort) apply without a rebuild;
- resetting a session and a fallback model taking over both evict it;
- the system prompt is frozen per session until a rebuild;
- concurrent messages of one session build once; other sessions are unaffected.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import grpc
import httpx
import openai
import pytest

from agentmesh.common.v1 import run_pb2, types_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_resources
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import Agent, Stack, final
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-cache-rules-0123456789"
SHARED_PREFIX = "eyJhbGci.token-for-account-"


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "keyed.key"
    path.write_text(SHARED_PREFIX + "a")
    return path


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI, key_file: Path) -> dict[str, Any]:
    # The same server under three providers: `alt` differs by its base URL, `keyed` by its key.
    alt_url = openai_server.base_url.replace("127.0.0.1", "localhost")
    return {
        "openai_base_url": openai_server.base_url,
        "openai_api_key": KEY,
        "providers": {
            "alt": {"base_url": alt_url, "api_key": KEY},
            "keyed": {"base_url": openai_server.base_url, "api_key_file": str(key_file)},
        },
        "model_retry_initial_backoff_seconds": 0.01,
        "model_retry_max_backoff_seconds": 0.02,
    }


def model_name() -> str:
    return f"m-{uuid.uuid4().hex[:8]}"


async def answered(stack: Stack, agent: Agent, message: str, session_id: str, **settings: Any) -> str:
    """A chat through the gateway (with per-message model settings when given); its answer."""
    request = gateway_service_pb2.StreamChatRequest(agent=agent.ref, message=message, session_id=session_id)
    if settings:
        request.model_settings.CopyFrom(run_pb2.ModelSettings(**settings))
    events = [r.event async for r in stack.client.gateway.StreamChat(request, metadata=stack.metadata)]
    completed = final(events)
    assert completed.HasField("run_completed"), completed
    return completed.run_completed.content


def _says(body: dict[str, Any], text: str) -> bool:
    """Whether a chat-completions request's last user message is `text`."""
    users = [m for m in body["messages"] if m["role"] == "user"]
    return bool(users) and users[-1]["content"] == text


async def settled(stack: Stack) -> None:
    async def idle() -> bool:
        return (await stack.stats()).active_runs == 0

    # A run's stream ends with its answer; the runtime is handed back to the cache right after.
    await eventually(idle, what="no run in flight")


async def test_the_same_config_reuses_the_runtime_across_a_sessions_messages(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="one"), Reply(text="two"), Reply(text="three"))
    agent = await stack.agent(await stack.project(), "reused", model=f"openai/{model}")
    session = f"reuse-{uuid.uuid4().hex[:8]}"

    before = await stack.stats()
    assert [await answered(stack, agent, f"message {n}", session) for n in (1, 2, 3)] == [
        "one",
        "two",
        "three",
    ]
    assert await stack.cache_delta(before) == (2, 1, 0), "built once, then hit by the session's next messages"
    assert len(openai_server.for_model(model)) == 3


@pytest.mark.parametrize(
    ("path", "config"),
    [
        ("config.primary_model", lambda m: resources_pb2.AgentConfig(primary_model=f"openai/{m}-other")),
        ("config.primary_model", lambda m: resources_pb2.AgentConfig(primary_model=f"alt/{m}")),
        (
            "config.tools",
            lambda m: resources_pb2.AgentConfig(tools=types_pb2.StringList(values=["get_current_time"])),
        ),
        ("config.instructions", lambda m: resources_pb2.AgentConfig(instructions="Answer in French.")),
        (
            "config.network_access",
            lambda m: resources_pb2.AgentConfig(network_access=types_pb2.StringList(values=["helper"])),
        ),
    ],
    ids=["model", "provider-and-base-url", "tools", "instructions", "network-access"],
)
async def test_a_behaviour_change_rebuilds(
    stack: Stack, openai_server: FakeOpenAI, path: str, config
) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="before"))
    openai_server.script(f"{model}-other", Reply(text="after"))
    project = await stack.project()
    await stack.agent(project, "helper", mock_responses=["helped"])
    agent = await stack.agent(project, "changing", model=f"openai/{model}")
    session = f"change-{uuid.uuid4().hex[:8]}"
    await answered(stack, agent, "first", session)

    await stack.update_config(agent, path, config(model), moving=session)
    before = await stack.stats()
    await answered(stack, agent, "after the change", session)
    assert await stack.cache_delta(before) == (0, 1, 0), f"a changed {path} rebuilds"
    before = await stack.stats()
    await answered(stack, agent, "again", session)
    assert await stack.cache_delta(before) == (1, 0, 0), "and the rebuilt runtime is reused"


async def test_a_changed_api_key_rebuilds_even_when_it_shares_a_prefix(
    stack: Stack, openai_server: FakeOpenAI, key_file: Path
) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="keyed"))
    agent = await stack.agent(await stack.project(), "keyed", model=f"keyed/{model}")
    session = f"key-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(key_file.write_text, SHARED_PREFIX + "a")
    await answered(stack, agent, "first", session)

    before = await stack.stats()
    await answered(stack, agent, "same key", session)
    assert await stack.cache_delta(before) == (1, 0, 0)

    # The same first 27 characters, another key.
    await asyncio.to_thread(key_file.write_text, SHARED_PREFIX + "b")
    before = await stack.stats()
    await answered(stack, agent, "new key", session)
    assert await stack.cache_delta(before) == (0, 1, 0), "another key (same prefix) rebuilds"
    sent = [r.headers["authorization"] for r in openai_server.for_model(model)]
    assert sent == [f"Bearer {SHARED_PREFIX}a"] * 2 + [f"Bearer {SHARED_PREFIX}b"]


async def test_per_message_settings_apply_without_a_rebuild(stack: Stack, openai_server: FakeOpenAI) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="tuned"))
    agent = await stack.agent(
        await stack.project(), "tuned", model=f"openai/{model}", model_params={"temperature": 0.9}
    )
    session = f"tune-{uuid.uuid4().hex[:8]}"

    before = await stack.stats()
    await answered(stack, agent, "plain", session)
    await answered(stack, agent, "cool", session, temperature=0.2, max_tokens=64, reasoning_effort="low")
    client = openai.AsyncOpenAI(
        base_url=f"{stack.mesh.gateway.http.url}/v1", api_key=stack.token, max_retries=0
    )
    completion = await client.chat.completions.create(
        model=agent.ref,
        messages=[{"role": "user", "content": "warm"}],
        temperature=1.5,
        max_tokens=32,
        reasoning_effort="high",
        extra_headers={"X-Session-Id": session},
    )
    assert completion.choices[0].message.content == "tuned"
    assert await stack.cache_delta(before) == (2, 1, 0), "per-message settings never rebuild"

    bodies = [r.body for r in openai_server.for_model(model)]
    assert bodies[0]["temperature"] == 0.9 and "max_tokens" not in bodies[0], "the agent's own params"
    assert (bodies[1]["temperature"], bodies[1]["max_tokens"], bodies[1]["reasoning_effort"]) == (
        0.2,
        64,
        "low",
    )
    assert (bodies[2]["temperature"], bodies[2]["max_tokens"], bodies[2]["reasoning_effort"]) == (
        1.5,
        32,
        "high",
    )

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await answered(stack, agent, "too hot", session, temperature=3.0)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "model_settings.temperature" in (refused.value.details() or "")
    with pytest.raises(openai.UnprocessableEntityError) as bad:
        await client.chat.completions.create(
            model=agent.ref, messages=[{"role": "user", "content": "x"}], reasoning_effort="extreme"
        )
    assert "reasoning_effort" in str(bad.value)
    with pytest.raises(openai.UnprocessableEntityError) as bad:
        await client.chat.completions.create(
            model=agent.ref, messages=[{"role": "user", "content": "x"}], max_completion_tokens=0
        )
    assert "max_completion_tokens" in str(bad.value)
    await client.close()


async def test_resetting_a_session_evicts_its_runtimes_and_leaves_other_sessions_alone(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="hello"))
    agent = await stack.agent(await stack.project(), "resettable", model=f"openai/{model}")
    reset, kept = f"reset-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    await answered(stack, agent, "first", reset)
    await answered(stack, agent, "first", kept)
    await settled(stack)

    response = await stack.client.gateway.ResetSession(
        gateway_service_pb2.ResetSessionRequest(project_id=agent.project.id, session_id=reset),
        metadata=stack.metadata,
    )
    assert response.released_agents == 1
    before = await stack.stats()
    await answered(stack, agent, "after the reset", reset)
    assert await stack.cache_delta(before) == (0, 1, 0), "the reset session builds afresh"
    # ... and its context too: the model is not shown the turns before the reset, while the
    # session that was not reset still carries its history.
    await answered(stack, agent, "second", kept)
    after_reset = next(r.body for r in openai_server.for_model(model) if _says(r.body, "after the reset"))
    assert [m["content"] for m in after_reset["messages"] if m["role"] != "system"] == ["after the reset"]
    kept_second = next(r.body for r in openai_server.for_model(model) if _says(r.body, "second"))
    assert [m["content"] for m in kept_second["messages"] if m["role"] != "system"][:1] == ["first"]
    events = await stack.events(reset)  # the log keeps everything
    user = memory_resources.EventType.EVENT_TYPE_USER_MESSAGE
    assert [e.content for e in events if e.event_type == user] == ["first", "after the reset"]
    before = await stack.stats()
    await answered(stack, agent, "untouched", kept)
    assert await stack.cache_delta(before) == (1, 0, 0), "another session keeps its runtime"

    await settled(stack)
    async with httpx.AsyncClient(base_url=stack.mesh.gateway.http.url) as http:
        headers = {"Authorization": f"Bearer {stack.token}"}
        base = f"/api/v1/projects/{agent.project.id}/sessions"
        rest = await http.post(f"{base}/{kept}/reset", headers=headers)
        assert rest.status_code == 200, rest.text
        assert rest.json() == {"session_id": kept, "released_agents": 1}
        missing = await http.post(f"{base}/no-such-session/reset", headers=headers)
        assert missing.status_code == 404, missing.text
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stack.client.gateway.ResetSession(
            gateway_service_pb2.ResetSessionRequest(project_id=agent.project.id), metadata=stack.metadata
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "session_id" in (refused.value.details() or "")


async def test_a_fallback_model_taking_over_evicts_the_runtime(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    primary, fallback = model_name(), model_name()
    openai_server.script(
        primary, Reply(status=503), Reply(status=503), Reply(status=503), Reply(text="primary")
    )
    openai_server.script(fallback, Reply(text="fallback"))
    agent = await stack.agent(
        await stack.project(), "falling", model=f"openai/{primary}", fallback_models=[f"openai/{fallback}"]
    )
    session = f"fallback-{uuid.uuid4().hex[:8]}"

    before = await stack.stats()
    assert await answered(stack, agent, "first", session) == "fallback"
    await settled(stack)
    assert await stack.cache_delta(before) == (0, 1, 1), "the fallback's runtime is evicted after its run"

    before = await stack.stats()
    assert await answered(stack, agent, "second", session) == "primary", "the primary is tried afresh"
    assert await stack.cache_delta(before) == (0, 1, 0)


async def test_the_system_prompt_is_frozen_per_session_until_a_rebuild(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="noted"))
    project = await stack.project()
    await stack.agent(project, "helper", mock_responses=["helped"])
    agent = await stack.agent(project, "frozen", model=f"openai/{model}", network_access=["helper"])
    session = f"frozen-{uuid.uuid4().hex[:8]}"
    for message in ("one", "two", "three"):
        await answered(stack, agent, message, session)
    await stack.update_config(
        agent, "config.instructions", resources_pb2.AgentConfig(instructions="Be terse."), moving=session
    )
    await answered(stack, agent, "four", session)

    systems = [
        json.dumps(r.body["messages"][0], sort_keys=True).encode() for r in openai_server.for_model(model)
    ]
    assert systems[0] == systems[1] == systems[2], "byte-identical on every turn"
    assert systems[3] != systems[0] and b"Be terse." in systems[3], "until a rebuild"
    assert b"helper" in systems[0]


async def test_concurrent_messages_of_one_session_build_once(stack: Stack, openai_server: FakeOpenAI) -> None:
    model = model_name()
    openai_server.script(model, Reply(text="together"))
    agent = await stack.agent(await stack.project(), "raced", model=f"openai/{model}")
    session = f"race-{uuid.uuid4().hex[:8]}"

    before = await stack.stats()
    answers = await asyncio.gather(*(answered(stack, agent, f"m{n}", session) for n in range(5)))
    assert answers == ["together"] * 5
    assert await stack.cache_delta(before) == (4, 1, 0), "one build, shared by every racing message"
