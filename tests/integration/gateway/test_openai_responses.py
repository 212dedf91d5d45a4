"""OpenAI's Responses API (`POST /v1/responses`) through the official `openai` client: a response
object plain, OpenAI's semantic events streamed, `previous_response_id` continuing the session (and
answering a run that waits for input), a failed run an error, a client that goes away cancelling
the run, and what an agent cannot honour a 400 naming the field."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api, asking_agent
from tests.integration.gateway.test_disconnect import SLOW, assert_cancelled
from tests.integration.gateway.test_openai import ANSWER, agent_client, root_client

ECHO = {"echo_prompt": True}  # the mock model answers with what it was given
STREAMED = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


async def test_a_response_plain_and_streamed(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[ANSWER])
    client = root_client(mesh, agent.owner.token)

    response = await client.responses.create(
        model=agent.model, input="What is the answer?", metadata={"k": "v"}
    )
    assert response.object == "response" and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == agent.model
    assert response.output_text == ANSWER
    assert [item.type for item in response.output] == ["message"]
    assert response.usage is not None and response.usage.total_tokens > 0
    assert response.usage.input_tokens_details.cached_tokens == 0

    stream = await client.responses.create(model=agent.model, input="Again?", stream=True)
    events = [event async for event in stream]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert [kind for index, kind in enumerate(kinds) if kind not in kinds[:index]] == STREAMED
    deltas = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    completed = events[-1]
    assert completed.type == "response.completed"
    assert deltas.strip() == ANSWER and completed.response.output_text == deltas
    assert completed.response.usage is not None and completed.response.usage.total_tokens > 0


async def test_previous_response_id_continues_the_session(mesh: Mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=[ECHO])
    client = root_client(mesh, agent.owner.token)

    first = await client.responses.create(
        model=agent.model, instructions="Answer in French.", input=[{"role": "user", "content": "I am Ada."}]
    )
    seen = "system: Answer in French.\nuser: I am Ada."
    assert first.output_text == seen

    # The session goes on from that response: the new input is all a client sends; the per-agent
    # route reads the same ids.
    second = await agent_client(mesh, agent.base, agent.owner.token).responses.create(
        model="anything", input="Who am I?", previous_response_id=first.id
    )
    assert second.output_text == f"{seen}\nassistant: {seen}\nuser: Who am I?"
    assert second.previous_response_id == first.id and second.id != first.id

    stream = await client.responses.create(
        model=agent.model, input="Sure?", previous_response_id=second.id, stream=True
    )
    said = "".join([event.delta async for event in stream if event.type == "response.output_text.delta"])
    assert said.endswith(f"\nuser: Who am I?\nassistant: {second.output_text}\nuser: Sure?")

    # A session named by the mesh's header is continued as on chat completions.
    mine = f"mine-{uuid.uuid4().hex}"
    named = await client.responses.with_raw_response.create(
        model=agent.model, input="Hello.", extra_headers={"X-Session-Id": mine}
    )
    assert named.headers["X-Session-Id"] == mine and named.parse().id.endswith(f"_{mine}")

    # A response continues only in its own project: another's agent does not find it.
    elsewhere = await api.agent(mock_responses=[ECHO])
    with pytest.raises(openai.BadRequestError) as refused:
        await root_client(mesh, elsewhere.owner.token).responses.create(
            model=elsewhere.model, input="Who am I?", previous_response_id=first.id
        )
    assert (refused.value.param, refused.value.code) == (
        "previous_response_id",
        "previous_response_not_found",
    )


async def test_a_response_that_asks_is_answered_by_the_next(mesh: Mesh, api: Api, once: None) -> None:
    agent = await asking_agent(api, "Which city?", "Booked in Lisbon.")
    client = root_client(mesh, agent.owner.token)
    asked = await client.responses.create(model=agent.model, input="Book me a trip.")
    assert "Which city?" in asked.output_text

    # The waiting run takes the next input as its answer and goes on: the same run answers.
    booked = await client.responses.create(model=agent.model, input="Lisbon", previous_response_id=asked.id)
    assert booked.output_text == "Booked in Lisbon." and booked.id == asked.id


async def test_a_client_that_goes_away_cancels_the_run(http: httpx.AsyncClient, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    body = {"model": agent.model, "input": "tell me slowly", "stream": True}
    async with http.stream("POST", "/v1/responses", json=body, headers=agent.owner.headers) as response:
        assert response.status_code == 200
        session_id = response.headers["X-Session-Id"]
        async for line in response.aiter_lines():
            if line.startswith("event: response.output_text.delta"):
                break
    # Leaving the block with the body unread closes the connection: the client is gone.
    await assert_cancelled(api, agent, session_id)


async def test_a_failed_run_is_an_error(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["Lisbon, for three nights."])
    client = root_client(mesh, agent.owner.token)
    as_json: Any = {"format": {"type": "json_object"}}

    with pytest.raises(openai.InternalServerError) as failed:
        await client.responses.create(model=agent.model, input="Plan my trip.", text=as_json)
    assert failed.value.code == "answer_not_in_format"

    stream = await client.responses.create(
        model=agent.model, input="Plan my trip.", text=as_json, stream=True
    )
    events = [event async for event in stream]
    assert events[-1].type == "response.failed"
    assert events[-1].response.status == "failed"
    assert events[-1].response.error is not None and events[-1].response.error.code == "answer_not_in_format"


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "unsupported_parameter"),
    ({"tool_choice": "required"}, "tool_choice", "invalid_value"),  # no tools to call
    ({"tool_choice": "banana"}, "tool_choice", "invalid_value"),
    ({"tool_choice": {"type": "function", "name": "f"}}, "tool_choice", "invalid_value"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        "input[0].content[0].type",
        "unsupported_parameter",
    ),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "42"}]},
        "input[0].call_id",  # a result for a call that does not wait
        "invalid_value",
    ),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type", "unsupported_parameter"),
    ({"input": [{"role": "wizard", "content": "hi"}]}, "input[0].role", "invalid_value"),
    ({"include": ["message.output_text.logprobs"]}, "include", "unsupported_parameter"),
    ({"background": True}, "background", "unsupported_parameter"),
    ({"reasoning": {"summary": "auto"}}, "reasoning.summary", "unsupported_parameter"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort", "invalid_value"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type", "invalid_value"),
    ({"previous_response_id": "resp_elsewhere"}, "previous_response_id", "previous_response_not_found"),
    (
        {"previous_response_id": f"resp_{uuid.uuid4().hex}_{uuid.uuid4().hex}"},
        "previous_response_id",
        "previous_response_not_found",
    ),
]


@pytest.mark.parametrize(
    ("fields", "param", "code"), REFUSED, ids=[f"{case[1]}-{case[2]}" for case in REFUSED]
)
async def test_what_cannot_be_honoured_is_a_400_naming_the_field(
    mesh: Mesh, api: Api, once: None, fields: dict[str, Any], param: str, code: str
) -> None:
    agent = await api.agent(mock_responses=["never said"])
    body = {"input": "hi", **fields}
    with pytest.raises(openai.BadRequestError) as refused:
        await root_client(mesh, agent.owner.token).responses.create(
            model=agent.model, input=body.pop("input"), extra_body=body
        )
    assert (refused.value.status_code, refused.value.type) == (400, "invalid_request_error")
    assert (refused.value.param, refused.value.code) == (param, code)
    sessions = await api.http.get(
        f"/api/v1/projects/{agent.project_id}/sessions", headers=agent.owner.headers
    )
    assert sessions.json()["data"] == []  # nothing ran


async def test_what_only_tunes_is_answered_and_settings_apply_to_the_run(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await api.agent(mock_responses=["answered"])
    raw = await root_client(mesh, agent.owner.token).responses.with_raw_response.create(
        model=agent.model,
        input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        tools=[],
        tool_choice="auto",
        include=[],
        store=True,
        user=uuid.uuid4().hex,
        metadata={"k": "v"},
        max_output_tokens=64,
        temperature=0.5,
        reasoning={"effort": "low"},
        top_p=0.5,
        truncation="auto",
    )
    assert raw.parse().output_text == "answered"
    events = await api.session_events(agent, raw.headers["X-Session-Id"])
    settings = next(e for e in events if e["event_type"] == "user_message")["metadata"]["model_settings"]
    assert settings == {"temperature": 0.5, "max_tokens": 64, "reasoning_effort": "low"}
