"""Client-side tools on the OpenAI-compatible faces, through the official `openai` client: the
function tools a request offers go to the agent's model beside its own; when it calls one, the
completion returns the call (`tool_calls`, `finish_reason` "tool_calls") while the run waits; the
follow-up carrying the tool's result resumes that run, whose answer uses it — plain and streamed,
with or without a session id. A result for a call that does not wait is a 400 naming it;
`tool_choice` is honoured, and a tool named as one of the agent's is refused."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.conftest import start_gateway
from tests.integration.gateway.support import Agent, Api, sse_blocks
from tests.integration.gateway.test_openai import TIMEOUT_SECONDS, root_client

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALLS_WEATHER = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
ASKED = [{"role": "user", "content": "Weather in Paris?"}]


async def weather_agent(api: Api, *then: Any, **type_fields: Any) -> Agent:
    """An agent whose model calls the client's `get_weather`, then answers `then` (by default
    with the conversation it was given: how a test sees the tool's result reach it)."""
    return await api.agent(
        mock_responses=[CALLS_WEATHER, *(then or [{"echo_prompt": True}])], type_fields=type_fields
    )


def follow_up(completion: Any, output: str) -> list[dict[str, Any]]:
    """The messages a client sends back: the conversation, the assistant's calls, a result each."""
    message = completion.choices[0].message
    calls = [call.model_dump() for call in message.tool_calls]
    results = [{"role": "tool", "tool_call_id": call["id"], "content": output} for call in calls]
    return [*ASKED, {"role": "assistant", "content": message.content, "tool_calls": calls}, *results]


async def test_a_client_tool_call_is_returned_and_its_result_resumes_the_run(mesh: Mesh, api: Api) -> None:
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)

    called = await client.chat.completions.create(model=agent.model, messages=ASKED, tools=[WEATHER])
    choice = called.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    # A stateless client: no session id, the call's id leads to the waiting run.
    answered = await client.chat.completions.create(
        model=agent.model, messages=follow_up(called, "18C and sunny"), tools=[WEATHER]
    )
    assert answered.choices[0].finish_reason == "stop"
    assert "tool: 18C and sunny" in (answered.choices[0].message.content or "")
    assert answered.id == called.id  # the same run, resumed


async def test_each_call_is_answered_on_any_gateway_and_the_resumed_run_may_call_again(
    mesh: Mesh, api: Api, once: None
) -> None:
    def weather(*cities: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "get_weather", "arguments": {"city": city}} for city in cities]}

    agent = await api.agent(mock_responses=[weather("Paris", "Lyon"), weather("Oslo"), {"echo_prompt": True}])
    called = await root_client(mesh, agent.owner.token).chat.completions.create(
        model=agent.model, messages=ASKED, tools=[WEATHER]
    )
    paris, lyon = called.choices[0].message.tool_calls or []
    assert json.loads(lyon.function.arguments) == {"city": "Lyon"}
    other = await start_gateway(mesh)  # the run is found through the registry, not this gateway
    try:
        client = AsyncOpenAI(
            base_url=f"{other.http.url}/v1",  # type: ignore[attr-defined]
            api_key=agent.owner.token,
            max_retries=0,
            timeout=TIMEOUT_SECONDS,
        )

        async def answer(call: Any, output: str) -> Any:
            assistant = {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]}
            result = {"role": "tool", "tool_call_id": call.id, "content": output}
            return await client.chat.completions.create(
                model=agent.model, messages=[*ASKED, assistant, result], tools=[WEATHER]
            )

        # One result of two: the run still waits for the other call.
        waiting = await answer(paris, "sun")
        assert waiting.choices[0].finish_reason == "tool_calls"
        assert [call.id for call in waiting.choices[0].message.tool_calls or []] == [lyon.id]
        # Both answered, the resumed run calls the client's tool again: still offered to it.
        again = await answer(lyon, "rain")
        [oslo] = again.choices[0].message.tool_calls or []
        assert json.loads(oslo.function.arguments) == {"city": "Oslo"}
        answered = await answer(oslo, "snow")
        said = answered.choices[0].message.content or ""
        assert all(f"tool: {output}" in said for output in ("sun", "rain", "snow")), said
    finally:
        await other.stop(1)


async def test_streamed_the_calls_then_the_resumed_answer(mesh: Mesh, api: Api, once: None) -> None:
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)

    stream = await client.chat.completions.create(
        model=agent.model, messages=ASKED, tools=[WEATHER], stream=True
    )
    chunks = [chunk async for chunk in stream]
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.function.name) for d in deltas if d.function] == [(0, "get_weather")]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    call_id = deltas[0].id

    messages = [
        *ASKED,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "rain"},
    ]
    stream = await client.chat.completions.create(
        model=agent.model, messages=messages, tools=[WEATHER], stream=True
    )
    chunks = [chunk async for chunk in stream]
    said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "tool: rain" in said
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


async def test_a_broken_stream_of_tool_calls_is_picked_up_by_last_event_id(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    agent = await weather_agent(api)
    body = {
        "model": agent.model,
        "session_id": uuid.uuid4().hex,
        "messages": ASKED,
        "tools": [WEATHER],
        "stream": True,
    }
    whole = sse_blocks((await http.post("/v1/chat/completions", json=body, headers=agent.owner.headers)).text)
    # Picked up after the first chunk (the role): the rest is the calls, once, and the end.
    headers = {**agent.owner.headers, "Last-Event-ID": whole[0]["id"]}
    rest = sse_blocks((await http.post("/v1/chat/completions", json=body, headers=headers)).text)
    assert rest[-1] == {"data": "[DONE]"}
    choices = [json.loads(block["data"])["choices"][0] for block in rest[:-1]]
    [call] = [call for choice in choices for call in choice["delta"].get("tool_calls") or []]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {
        "city": "Paris"
    }
    assert choices[-1]["finish_reason"] == "tool_calls"


async def test_a_result_for_no_waiting_call_is_a_400_naming_it(mesh: Mesh, api: Api, once: None) -> None:
    agent = await weather_agent(api, "done")
    client = root_client(mesh, agent.owner.token)
    called = await client.chat.completions.create(model=agent.model, messages=ASKED, tools=[WEATHER])
    messages = follow_up(called, "sunny")
    messages[-1]["tool_call_id"] = "call_unknown"
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model=agent.model, messages=messages, tools=[WEATHER])
    assert refused.value.param == "messages[2].tool_call_id"
    assert "call_unknown" in str(refused.value)

    # The run still waits: the right id resumes it; then it waits no more, and the id is refused.
    answered = await client.chat.completions.create(
        model=agent.model, messages=follow_up(called, "sunny"), tools=[WEATHER]
    )
    assert answered.choices[0].message.content == "done"
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model=agent.model, messages=follow_up(called, "sunny"), tools=[WEATHER]
        )
    assert refused.value.param == "messages[2].tool_call_id"


async def test_tool_choice_is_honoured(mesh: Mesh, api: Api, once: None) -> None:
    told = await api.agent(mock_responses=[{"echo_prompt": True}])
    client = root_client(mesh, told.owner.token)
    for choice, instruction in (
        ("required", "you must call at least one of these tools: get_weather"),
        ({"type": "function", "function": {"name": "get_weather"}}, "you must call the tool get_weather"),
    ):
        completion = await client.chat.completions.create(
            model=told.model, messages=ASKED, tools=[WEATHER], tool_choice=choice
        )
        assert instruction in (completion.choices[0].message.content or "")
    auto = await client.chat.completions.create(
        model=told.model, messages=ASKED, tools=[WEATHER], tool_choice="auto"
    )
    assert "must call" not in (auto.choices[0].message.content or "")

    # "none": the client's tools are not offered, so the model's call is not the client's.
    agent = await weather_agent(api, "answered without it")
    client = root_client(mesh, agent.owner.token)
    completion = await client.chat.completions.create(
        model=agent.model, messages=ASKED, tools=[WEATHER], tool_choice="none"
    )
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content == "answered without it"


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"tool_choice": "required"}, "tool_choice"),  # no tools to call
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0].function.name"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
    (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 7}}}]},
        "tools[0].function.parameters",
    ),
    ({"tools": [{**WEATHER, "function": {"name": "get_current_time"}}]}, "tools[0].function.name"),
]


@pytest.mark.parametrize(("fields", "param"), REFUSED, ids=[str(index) for index in range(len(REFUSED))])
async def test_tools_refused_as_openai_refuses_them(
    mesh: Mesh, api: Api, once: None, fields: dict[str, Any], param: str
) -> None:
    agent = await api.agent(mock_responses=["never said"], type_fields={"tools": ["get_current_time"]})
    with pytest.raises(openai.BadRequestError) as refused:
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=agent.model, messages=ASKED, extra_body=fields
        )
    assert refused.value.param == param
    assert refused.value.code == "invalid_value"


RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}


async def test_responses_function_calls_and_their_outputs(mesh: Mesh, api: Api, once: None) -> None:
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)

    called = await client.responses.create(
        model=agent.model, input="Weather in Paris?", tools=[RESPONSES_WEATHER]
    )
    [call] = [item for item in called.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}

    output = {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}
    answered = await client.responses.create(
        model=agent.model, previous_response_id=called.id, input=[output], tools=[RESPONSES_WEATHER]
    )
    assert "tool: 18C" in answered.output_text

    # Streamed, as a client that keeps no conversation on the server sends it: all of it again.
    agent = await weather_agent(api)
    client = root_client(mesh, agent.owner.token)
    stream = await client.responses.create(
        model=agent.model, input="Weather in Paris?", tools=[RESPONSES_WEATHER], stream=True
    )
    events = [event async for event in stream]
    done = events[-1]
    assert done.type == "response.completed"
    [call] = [item for item in done.response.output if item.type == "function_call"]
    assert "response.function_call_arguments.done" in [event.type for event in events]
    again = [
        {"role": "user", "content": "Weather in Paris?"},
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "snow"},
    ]
    stream = await client.responses.create(
        model=agent.model, input=again, tools=[RESPONSES_WEATHER], stream=True
    )
    events = [event async for event in stream]
    assert events[-1].type == "response.completed"
    assert "tool: snow" in events[-1].response.output_text


async def test_a_workflow_agent_refuses_client_tools(mesh: Mesh, api: Api, once: None) -> None:
    owner = await api.user()
    project = await api.project(owner)
    await api.agent(owner, name="step", mock_responses=["never said"], project=project)
    pipeline = await api.agent(
        owner, name="pipeline", project=project, type_fields={"kind": "sequential", "sub_agents": ["step"]}
    )
    with pytest.raises(openai.BadRequestError) as refused:
        await root_client(mesh, owner.token).chat.completions.create(
            model=pipeline.model, messages=ASKED, tools=[WEATHER]
        )
    assert (refused.value.param, refused.value.code) == ("tools", "unsupported_parameter")


async def test_a_user_message_cannot_answer_a_tool_call(mesh: Mesh, api: Api, once: None) -> None:
    agent = await weather_agent(api, "done")
    client = root_client(mesh, agent.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}
    called = await client.chat.completions.create(
        model=agent.model, messages=ASKED, tools=[WEATHER], extra_headers=session
    )
    [call] = called.choices[0].message.tool_calls or []
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        await client.chat.completions.create(
            model=agent.model, messages=[{"role": "user", "content": "sunny"}], extra_headers=session
        )
    assert "a `tool` message whose tool_call_id is " + call.id in str(refused.value)
    answered = await client.chat.completions.create(
        model=agent.model, messages=follow_up(called, "sunny"), tools=[WEATHER], extra_headers=session
    )
    assert answered.choices[0].message.content == "done"
