"""The LLM loop through the whole mesh: tool calls (native and fenced, function tools and MCP
servers over stdio and streamable HTTP) recorded and fed back, errors fed back rather than
crashing, `max_steps` ending a model that never stops calling tools, the OpenAI provider against a
local server, and the agent's lifecycle while it runs."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition
from tests.integration.executor.mcp_http import serve_http
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import Stack, calls, event_type, final, kind
from tests.integration.executor.test_tool_permissions import respond
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

MCP_SCRIPT = Path(__file__).with_name("mcp_server.py")
OPENAI_KEY = "sk-loop-test-" + "q" * 30
UTC_CALL = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {
        "openai_base_url": openai_server.base_url,
        "openai_api_key": OPENAI_KEY,
        "model_retry_initial_backoff_seconds": 0.01,
        "tool_timeout_seconds": 2.0,
    }


def arguments(event) -> dict[str, Any]:
    return json_format.MessageToDict(event.tool_call.arguments)


async def test_tool_calls_run_and_their_results_are_recorded_and_fed_back(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "clock",
        tools=["get_current_time"],
        mock_responses=[
            {
                "content": "Checking two clocks.",
                "tool_calls": [
                    {"name": "get_current_time", "arguments": {"timezone": "UTC"}},
                    {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}},
                ],
            },
            "It is now.",
        ],
    )

    events = await stack.chat(agent, "what time is it?")

    tool_calls = [e for e in events if kind(e) == "tool_call"]
    results = [e for e in events if kind(e) == "tool_result"]
    assert [arguments(e) for e in tool_calls] == [{"timezone": "UTC"}, {"timezone": "Asia/Tokyo"}]
    assert sorted(e.tool_result.call_id for e in results) == sorted(e.tool_call.call_id for e in tool_calls)
    assert all(not e.tool_result.is_error for e in results)
    assert any(e.tool_result.output.endswith("+09:00") for e in results)
    assert final(events).run_completed.content == "It is now."
    assert final(events).run_completed.steps == 2

    stored = await stack.events(events[-1].session_id)
    types = [event_type(e) for e in stored]
    assert types[:3] == ["user_message", "tool_call", "tool_call"]
    assert sorted(types[3:5]) == ["tool_result", "tool_result"] and types[5] == "agent_response"
    by_id = {e.id: e for e in stored}
    for result in stored[3:5]:
        call = by_id[result.parent_event_id]
        assert event_type(call) == "tool_call"
        assert call.metadata["call_id"] == result.metadata["call_id"]
    assert all(e.seq == i for i, e in enumerate(stored, start=1))


async def test_bad_arguments_unknown_tools_and_fenced_blocks_are_fed_back(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "fumbler",
        tools=["get_current_time"],
        mock_responses=[
            calls("get_current_time", timezone=42),
            calls("launch_rockets"),
            f"Trying a block.\n```tool_call\n{json.dumps(UTC_CALL)}\n```",
            "Broken block:\n```tool_call\n{not json\n```",
            "Recovered.",
        ],
        max_steps=6,
    )

    events = await stack.chat(agent, "go")

    results = [e.tool_result for e in events if kind(e) == "tool_result"]
    assert results[0].is_error and "timezone: 42.0 is not of type 'string'" in results[0].output
    assert results[1].is_error and "unknown tool 'launch_rockets'" in results[1].output
    assert not results[2].is_error and results[2].output.endswith("+00:00")
    errors = [e.error for e in events if kind(e) == "error"]
    assert [e.reason for e in errors] == ["INVALID_BLOCK"] and "not valid JSON" in errors[0].message
    text = "".join(e.text_delta.text for e in events if kind(e) == "text_delta")
    assert "```" not in text and "Trying a block." in text
    assert final(events).run_completed.content == "Recovered."


async def test_max_steps_ends_a_model_that_always_calls_tools(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "looper",
        tools=["get_current_time"],
        max_steps=3,
        mock_responses=[{"content": "Still checking.", "tool_calls": [{"name": "get_current_time"}]}],
    )

    events = await stack.chat(agent, "never stop")

    done = final(events).run_completed
    assert done.max_steps_reached and done.steps == 3
    assert done.content.startswith("Still checking.") and "limit of 3 steps" in done.content
    assert len([e for e in events if kind(e) == "tool_call"]) == 3
    stored = await stack.events(events[-1].session_id)
    answer = stored[-1]
    assert event_type(answer) == "agent_response" and answer.metadata["max_steps_reached"] is True
    assert (await stack.settled_status(agent)) == "idle"


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_mcp_server_tools_are_called_in_a_run(stack: Stack, transport: str) -> None:
    project = await stack.project()
    async with serve_http() as url:
        server = (
            resources_pb2.McpServer(
                name="tools", transport="stdio", command=sys.executable, args=[str(MCP_SCRIPT)]
            )
            if transport == "stdio"
            else resources_pb2.McpServer(name="tools", transport="streamable_http", url=url)
        )
        agent = await stack.agent(
            project,
            "calculator",
            mcp_servers=[server],
            mock_responses=[calls("add", a=2, b=3), calls("fail", message="disk full"), "2 + 3 = 5"],
        )
        events = await stack.chat(agent, "add 2 and 3")

    results = [e.tool_result for e in events if kind(e) == "tool_result"]
    assert (results[0].name, results[0].output, results[0].is_error) == ("add", "5", False)
    assert results[1].is_error and "disk full" in results[1].output
    assert final(events).run_completed.content == "2 + 3 = 5"


async def test_an_openai_compatible_model_runs_the_loop(stack: Stack, openai_server: FakeOpenAI) -> None:
    model = f"loop-{uuid.uuid4().hex[:8]}"
    openai_server.script(
        model,
        Reply(status=429, retry_after="0"),
        Reply(text="Let me look.", tool_calls=[("get_current_time", {"timezone": "UTC"})], usage=(20, 5)),
        Reply(text="It is noon.", usage=(30, 4)),
    )
    project = await stack.project()
    agent = await stack.agent(
        project,
        "assistant",
        model=f"openai/{model}",
        tools=["get_current_time"],
        model_params={"temperature": 0},
    )

    events = await stack.chat(agent, "what time is it?")

    done = final(events).run_completed
    assert done.content == "It is noon."
    assert (done.usage.input_tokens, done.usage.output_tokens) == (50, 9)
    assert [e.tool_result.is_error for e in events if kind(e) == "tool_result"] == [False]
    requests = openai_server.for_model(model)
    assert len(requests) == 3
    last = requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool"]
    assert last[2]["tool_calls"][0]["function"]["name"] == "get_current_time"
    assert last[3]["tool_call_id"] == last[2]["tool_calls"][0]["id"]
    assert requests[-1].body["temperature"] == 0
    record = await stack.settled(agent)
    assert record.tokens_used == 59 and record.tasks_completed == 1
    # The key went to the model endpoint, and nowhere into memory.
    assert requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    stored = await stack.events(events[-1].session_id)
    assert all(
        OPENAI_KEY not in e.content and OPENAI_KEY not in json.dumps(json_format.MessageToDict(e))
        for e in stored
    )


async def test_the_context_window_holds_the_agents_own_history(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = f"history-{uuid.uuid4().hex[:8]}"
    openai_server.script(model, Reply(text="First answer."), Reply(text="Second answer."))
    project = await stack.project()
    agent = await stack.agent(project, "historian", model=f"openai/{model}")
    first = await stack.chat(agent, "first question")
    await stack.chat(agent, "second question", session_id=first[-1].session_id)
    messages = openai_server.for_model(model)[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "first question"),
        ("assistant", "First answer."),
        ("user", "second question"),
    ]


async def test_an_agent_is_working_while_it_runs_and_idle_after(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project, "slowpoke", mock_responses=[{"content": "slow " * 6, "delay_seconds": 0.1}]
    )
    chat = asyncio.create_task(stack.chat(agent, "take your time"))

    async def working() -> bool:
        return await stack.status(agent) == "working"

    await eventually(working, what="the agent working")
    events = await chat
    assert final(events).run_completed.content == "slow " * 6
    assert await stack.settled_status(agent) == "idle"


@pytest.mark.parametrize("lifecycle", ["paused", "terminated"])
async def test_a_paused_or_terminated_agent_refuses_to_run(stack: Stack, lifecycle: str) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "resting", mock_responses=["never"])
    await (stack.pause(agent) if lifecycle == "paused" else stack.terminate(agent))
    with pytest.raises(FailedPrecondition) as raised:
        await stack.run(agent, "wake up")
    assert lifecycle in raised.value.message.lower()
    gateway_chat = stack.chat(agent, "wake up")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway_chat
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_a_model_without_function_calling_uses_fenced_blocks(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = f"plain-{uuid.uuid4().hex[:8]}"
    block = f"```tool_call\n{json.dumps(UTC_CALL)}\n```"
    openai_server.script(model, Reply(text=f"One moment. {block}"), Reply(text="It is noon UTC."))
    project = await stack.project()
    await stack.agent(project, "helper", mock_responses=["helped"])
    agent = await stack.agent(
        project,
        "plain",
        model=f"openai/{model}",
        tools=["get_current_time"],
        network_access=["helper"],
        model_params={"function_calling": False},
    )

    events = await stack.chat(agent, "what time is it?")

    assert final(events).run_completed.content == "It is noon UTC."
    (result,) = [e.tool_result for e in events if kind(e) == "tool_result"]
    assert not result.is_error and result.output.endswith("+00:00")
    first, second = openai_server.for_model(model)
    assert "tools" not in first.body and "function_calling" not in first.body
    system = first.body["messages"][0]["content"]
    assert "```tool_call" in system and "```delegate" in system and "get_current_time" in system
    assert "helper" in system
    assert second.body["messages"][-1]["role"] == "user"
    assert second.body["messages"][-1]["content"].startswith("Results of your fenced blocks:")


async def test_a_clients_tool_choice_goes_to_the_model_until_it_called_what_it_must(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    if not stack.database_url.startswith("sqlite"):
        pytest.skip("what the model is sent does not depend on the database: runs once, on SQLite")
    model = f"choice-{uuid.uuid4().hex[:8]}"
    openai_server.script(
        model,
        Reply(tool_calls=[("get_current_time", {"timezone": "UTC"})]),  # its own tool: still bound
        Reply(tool_calls=[("get_weather", {"city": "Paris"})]),  # the client's: the run waits
        Reply(text="Sunny in Paris."),
    )
    project = await stack.project()
    agent = await stack.agent(project, "chooser", model=f"openai/{model}", tools=["get_current_time"])
    request = stack.run_request(agent, "Weather in Paris?")
    weather = executor_service_pb2.ClientTool(name="get_weather", parameters_json='{"type": "object"}')
    request.client_tools.append(weather)
    request.client_tool_choice = "required"

    events = [event async for event in stack.executor.run(request, metadata=stack.metadata)]
    (asked,) = [event.input_requested.request for event in events if kind(event) == "input_requested"]
    resumed = await respond(stack, agent, asked.id, answer="18C")

    assert final(resumed).run_completed.content == "Sunny in Paris."
    bodies = [received.body for received in openai_server.for_model(model)]
    # Sent as the model's own tool_choice, not told: once the client's tool was called, "auto".
    assert [body.get("tool_choice") for body in bodies] == ["required", "required", None]
    assert not [m for m in bodies[0]["messages"] if "must call" in (m.get("content") or "")]
