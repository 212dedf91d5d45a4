"""The `openai` provider against a local OpenAI-compatible server: streamed text, tool calls and
usage; retries with backoff on 429 and 5xx, then the fallback models; errors that are not
retryable fail at once; the API key never reaches a log line."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from agentmesh.executor.errors import ModelUnavailable
from agentmesh.executor.providers.base import Message, ModelError, ToolSpec, Usage
from agentmesh.executor.providers.factory import ModelFactory
from agentmesh.executor.settings import ExecutorSettings, ModelPrice
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.openai_server import FakeOpenAI, Reply

API_KEY = "sk-test-secret-" + "k" * 32
TOOL = ToolSpec("get_current_time", "The time.", {"type": "object", "properties": {}})


@pytest.fixture
async def server():
    async with FakeOpenAI() as fake:
        yield fake


def factory(server: FakeOpenAI, **overrides) -> ModelFactory:
    return ModelFactory(
        ExecutorSettings(
            openai_base_url=server.base_url,
            openai_api_key=SecretStr(API_KEY),
            model_retry_initial_backoff_seconds=0.01,
            model_retry_max_backoff_seconds=0.05,
            **overrides,
        )
    )


async def model_for(models: ModelFactory, primary: str, *fallbacks: str, params: dict | None = None):
    spec = resources_pb2.AgentSpec(primary_model=primary, fallback_models=list(fallbacks))
    if params:
        spec.model_params.update(params)
    return models.bind(await models.plan(spec)).for_run()


async def collect(model, tools=(TOOL,)):
    chunks = [
        c async for c in model.stream([Message("system", "sys"), Message("user", "what time is it?")], tools)
    ]
    return "".join(c.text for c in chunks), chunks[-1]


async def test_streams_text_tool_calls_and_usage(server: FakeOpenAI) -> None:
    server.script(
        "gpt-test",
        Reply(text="Let me check the time.", tool_calls=[("get_current_time", {"timezone": "UTC"})]),
    )
    models = factory(server, model_prices={"openai/gpt-test": ModelPrice(input_per_million_tokens=1_000_000)})
    model = await model_for(models, "openai/gpt-test", params={"temperature": 0.2, "num_ctx": 4096})
    text, last = await collect(model)
    assert text == "Let me check the time."
    assert [(c.id, c.name, c.arguments) for c in last.tool_calls] == [
        ("call_0", "get_current_time", {"timezone": "UTC"})
    ]
    assert last.usage == Usage(11, 7, 11.0)
    assert last.finish_reason == "tool_calls"
    (request,) = server.requests
    assert request.body["stream"] is True and request.body["stream_options"] == {"include_usage": True}
    assert request.body["tools"][0]["function"]["name"] == "get_current_time"
    assert request.body["temperature"] == 0.2 and request.body["num_ctx"] == 4096
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    await models.aclose()


async def test_bad_tool_arguments_are_reported_not_raised(server: FakeOpenAI) -> None:
    server.script("gpt-test", Reply(tool_calls=[("get_current_time", {})], raw_arguments='{"timezone": '))
    _, last = await collect(await model_for(factory(server), "gpt-test"))
    assert last.tool_calls[0].error.startswith("arguments are not valid JSON")


async def test_rate_limits_and_server_errors_are_retried(server: FakeOpenAI) -> None:
    server.script("gpt-test", Reply(status=429, retry_after="0"), Reply(status=503), Reply(text="finally"))
    text, _ = await collect(await model_for(factory(server), "openai/gpt-test"))
    assert text == "finally"
    assert len(server.requests) == 3


async def test_then_the_fallback_models_in_order(server: FakeOpenAI) -> None:
    server.script("primary", Reply(status=500))
    server.script("second", Reply(status=429))
    server.script("third", Reply(text="third answers"))
    model = await model_for(
        factory(server, model_max_retries=1), "openai/primary", "openai/second", "openai/third"
    )
    text, last = await collect(model)
    assert text == "third answers"
    assert last.response_model == "third"
    assert [r.model for r in server.requests] == ["primary", "primary", "second", "second", "third"]


async def test_errors_that_retrying_cannot_fix_fail_at_once(server: FakeOpenAI) -> None:
    server.script("primary", Reply(status=400))
    model = await model_for(factory(server), "openai/primary", "openai/second")
    with pytest.raises(ModelError, match="HTTP 400") as raised:
        await collect(model)
    assert not raised.value.retryable
    assert [r.model for r in server.requests] == ["primary"]


async def test_an_unreachable_endpoint_is_retryable_and_the_key_is_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    models = ModelFactory(
        ExecutorSettings(
            openai_base_url="http://127.0.0.1:9/v1",
            openai_api_key=SecretStr(API_KEY),
            model_max_retries=1,
            model_retry_initial_backoff_seconds=0.01,
        )
    )
    with pytest.raises(ModelError) as raised:
        await collect(await model_for(models, "openai/gpt-test"))
    assert raised.value.retryable
    assert API_KEY not in caplog.text
    assert API_KEY not in str(raised.value)


@pytest.mark.parametrize("status", [401, 400])
async def test_an_endpoint_that_echoes_the_key_never_gets_it_out(server: FakeOpenAI, status: int) -> None:
    server.script("gpt-test", Reply(status=status, echo_key=True))
    with pytest.raises(ModelError) as raised:
        await collect(await model_for(factory(server), "openai/gpt-test"))
    assert API_KEY not in str(raised.value)
    assert server.for_model("gpt-test")  # the endpoint did see (and echo) the key
    if status == 401:
        # The operator learns what to fix, in settings' terms.
        assert "AGENTMESH_OPENAI_API_KEY" in str(raised.value)
    else:
        assert "[redacted]" in str(raised.value)


async def test_a_missing_key_for_openai_is_a_clear_error_before_any_request() -> None:
    models = ModelFactory(ExecutorSettings(openai_base_url="https://api.openai.com/v1"))
    with pytest.raises(ModelUnavailable, match="set AGENTMESH_OPENAI_API_KEY"):
        await model_for(models, "openai/gpt-4o-mini")


async def test_a_keyless_compatible_endpoint_needs_no_key(server: FakeOpenAI) -> None:
    server.script("llama", Reply(text="hi"))
    models = ModelFactory(ExecutorSettings(openai_base_url=server.base_url))
    text, _ = await collect(await model_for(models, "openai/llama"))
    assert text == "hi"
    assert server.for_model("llama")[0].headers["authorization"] == "Bearer unused"
