"""A run that asks a person, through the OpenAI-compatible API with the official `openai` client:
the completion of a suspended run is what it asks (`finish_reason` "stop"), and the next user
message in that session answers it — the completion returned is the resumed run's answer,
plain or streamed, or what it asks next — also when a worker the agent delegated to asks.
Approvals are not raised by runs yet: their replies ("approve" / "deny: reason") are tested in
tests/unit/gateway/test_answers.py."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api, asking_agent, asks, sse_blocks, sse_text
from tests.integration.gateway.test_openai import root_client

QUESTION = "Which city should I book?"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_the_next_message_in_the_session_answers_the_question(mesh: Mesh, api: Api) -> None:
    agent = await asking_agent(api, QUESTION, "Booked Lisbon.")
    client = root_client(mesh, agent.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}

    asking = await client.chat.completions.create(
        model=agent.model, messages=user("Book me a trip."), extra_headers=session
    )
    assert QUESTION in (asking.choices[0].message.content or "")
    assert asking.choices[0].finish_reason == "stop"

    answered = await client.chat.completions.create(
        model=agent.model, messages=user("Lisbon"), extra_headers=session
    )
    assert answered.choices[0].message.content == "Booked Lisbon."
    assert answered.choices[0].finish_reason == "stop"
    assert answered.id == asking.id  # the same run, resumed
    events = await api.session_events(agent, session["X-Session-Id"])
    [result] = [e for e in events if e["event_type"] == "tool_result"]
    assert result["content"] == "Lisbon"
    assert [e["event_type"] for e in events].count("user_message") == 1  # no new run was started

    # Nothing waits any more: the next message is a new chat again.
    again = await client.chat.completions.create(
        model=agent.model, messages=user("Hi"), extra_headers=session
    )
    assert again.id != asking.id


async def test_streamed_the_question_then_the_resumed_answer(mesh: Mesh, api: Api, once: None) -> None:
    agent = await asking_agent(api, QUESTION, "Booked Oslo.")
    client = root_client(mesh, agent.owner.token)
    session = {"session_id": uuid.uuid4().hex}

    async def streamed(text: str) -> tuple[str, list[str | None]]:
        stream = await client.chat.completions.create(
            model=agent.model, messages=user(text), stream=True, extra_body=session
        )
        chunks = [chunk async for chunk in stream]
        said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return said, [c.choices[0].finish_reason for c in chunks if c.choices]

    said, finishes = await streamed("Book me a trip.")
    assert QUESTION in said and finishes[-1] == "stop"
    said, finishes = await streamed("Oslo")
    assert said == "Booked Oslo." and finishes[-1] == "stop"


async def test_a_run_that_asks_again_answers_with_its_next_question(mesh: Mesh, api: Api, once: None) -> None:
    agent = await asking_agent(api, QUESTION, asks("And which hotel?"), "Booked twice.")
    client = root_client(mesh, agent.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}
    said = []
    for text in ("Book me a trip.", "Rome", "The Grand"):
        completion = await client.chat.completions.create(
            model=agent.model, messages=user(text), extra_headers=session
        )
        said.append(completion.choices[0].message.content or "")
    assert QUESTION in said[0] and "And which hotel?" in said[1]
    assert said[2] == "Booked twice."


async def test_an_empty_answer_is_refused_naming_the_field(mesh: Mesh, api: Api, once: None) -> None:
    agent = await asking_agent(api, QUESTION, "Booked.")
    client = root_client(mesh, agent.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}
    await client.chat.completions.create(
        model=agent.model, messages=user("Book me a trip."), extra_headers=session
    )
    with pytest.raises((openai.BadRequestError, openai.UnprocessableEntityError)) as refused:
        await client.chat.completions.create(model=agent.model, messages=user("   "), extra_headers=session)
    assert "messages[0].content" in str(refused.value) and "answer it with any text" in str(refused.value)
    answered = await client.chat.completions.create(
        model=agent.model, messages=user("Bern"), extra_headers=session
    )
    assert answered.choices[0].message.content == "Booked."


async def test_a_broken_stream_of_a_question_is_picked_up_by_last_event_id(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    agent = await asking_agent(api, QUESTION, "Booked.")
    body = {
        "model": agent.model,
        "session_id": uuid.uuid4().hex,
        "messages": user("Book me a trip."),
        "stream": True,
    }
    whole = await http.post("/v1/chat/completions", json=body, headers=agent.owner.headers)
    blocks = sse_blocks(whole.text)
    asked = sse_text(blocks)
    assert QUESTION in asked
    # Picked up after the first chunk (the role): the rest is the question, once, and the end.
    headers = {**agent.owner.headers, "Last-Event-ID": blocks[0]["id"]}
    rest = sse_blocks((await http.post("/v1/chat/completions", json=body, headers=headers)).text)
    assert sse_text(rest) == asked
    assert rest[-1] == {"data": "[DONE]"}
    assert json.loads(rest[-2]["data"])["choices"][0]["finish_reason"] == "stop"


async def test_a_delegated_workers_question_is_answered_by_the_next_message(
    mesh: Mesh, api: Api, once: None
) -> None:
    worker = await asking_agent(api, QUESTION, "Lisbon it is.")
    project = {"id": worker.project_id, "slug": worker.project_slug}
    delegation = {"name": "delegate", "arguments": {"agent": worker.name, "task": "pick a city"}}
    coordinator = await api.agent(
        worker.owner,
        name="coordinator",
        project=project,
        mock_responses=[{"content": "", "tool_calls": [delegation]}, "Coordinated."],
        network_access=[worker.name],
    )
    client = root_client(mesh, coordinator.owner.token)
    session = {"X-Session-Id": uuid.uuid4().hex}

    asking = await client.chat.completions.create(
        model=coordinator.model, messages=user("Book me a trip."), extra_headers=session
    )
    assert QUESTION in (asking.choices[0].message.content or "")
    answered = await client.chat.completions.create(
        model=coordinator.model, messages=user("Lisbon"), extra_headers=session
    )
    assert answered.choices[0].message.content == "Coordinated."
    events = await api.session_events(coordinator, session["X-Session-Id"])
    [result] = [e for e in events if e["event_type"] == "tool_result"]
    assert result["content"] == "Lisbon"
    assert [e["event_type"] for e in events].count("user_message") == 1  # no new run was started
