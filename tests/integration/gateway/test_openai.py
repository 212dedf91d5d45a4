"""The OpenAI-compatible API, driven by the official `openai` client — the conformance test — at the
root (`model` = `project_slug/agent_name`) and at a per-agent base URL. The wire format does not
depend on the database (those tests run on SQLite only); sessions and concurrency run on both."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api

ANSWER = ("Forty-two is the answer, streamed back in several chunks of text " * 3).strip()


# The client's own connect timeout (5 s) is shorter than a busy host may take to accept fifty
# connections at once, with the whole mesh in this process: a generous one, so a slow host is slow,
# not a failure.
TIMEOUT_SECONDS = 120.0


def root_client(mesh: Mesh, token: str) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{mesh.gateway.http.url}/v1", api_key=token, max_retries=0, timeout=TIMEOUT_SECONDS
    )


def agent_client(mesh: Mesh, base: str, token: str) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=f"{mesh.gateway.http.url}{base}/v1", api_key=token, max_retries=0, timeout=TIMEOUT_SECONDS
    )


async def test_plain_and_streamed_answers_at_the_root(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[ANSWER])
    client = root_client(mesh, agent.owner.token)

    completion = await client.chat.completions.create(
        model=agent.model, messages=[{"role": "user", "content": "What is the answer?"}]
    )
    assert completion.object == "chat.completion"
    assert completion.model == agent.model
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0

    stream = await client.chat.completions.create(
        model=agent.model,
        messages=[{"role": "user", "content": "Again?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == ANSWER
    # The answer came as content chunks; how many is not the contract (text deltas that queue up
    # while a hop is busy merge): their concatenation is.
    assert any(c.choices and c.choices[0].delta.content for c in chunks), "answer should stream"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


async def test_per_agent_base_url_and_models(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["per agent"])
    client = agent_client(mesh, agent.base, agent.owner.token)
    completion = await client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "per agent"
    stream = await client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "per agent"

    models = await client.models.list()
    assert [m.id for m in models.data] == [agent.model]

    second = await api.agent(agent.owner, name="second")
    listed = [m.id async for m in root_client(mesh, agent.owner.token).models.list()]
    assert {agent.model, second.model} <= set(listed)
    retrieved = await root_client(mesh, agent.owner.token).models.retrieve(agent.model)
    assert retrieved.id == agent.model
    others = [m.id async for m in root_client(mesh, (await api.user()).token).models.list()]
    assert agent.model not in others


async def test_errors_raise_the_matching_openai_exceptions(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["x"])
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError):
        await root_client(mesh, "not-a-token").chat.completions.create(model=agent.model, messages=messages)
    with pytest.raises(openai.AuthenticationError):
        await agent_client(mesh, agent.base, "forged").chat.completions.create(model="m", messages=messages)
    with pytest.raises(openai.NotFoundError) as unknown:
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=f"{agent.project_slug}/nobody", messages=messages
        )
    assert unknown.value.status_code == 404
    with pytest.raises(openai.NotFoundError):
        await root_client(mesh, agent.owner.token).chat.completions.create(model="gpt-4o", messages=messages)
    with pytest.raises(openai.NotFoundError):  # someone else's agent looks unknown
        await root_client(mesh, (await api.user()).token).chat.completions.create(
            model=agent.model, messages=messages
        )
    with pytest.raises(openai.NotFoundError):
        await root_client(mesh, agent.owner.token).models.retrieve(f"{agent.project_slug}/nobody")

    # A paused agent refuses chats as an invalid state (DESIGN §3: 400 or 422, never 409).
    await api.http.post(f"{agent.path}/pause", headers=agent.owner.headers)
    with pytest.raises(openai.BadRequestError):
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=agent.model, messages=messages
        )
    with pytest.raises(openai.BadRequestError):  # streamed: refused before the stream starts
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=agent.model, messages=messages, stream=True
        )
    await api.http.post(f"{agent.path}/resume", headers=agent.owner.headers)

    with pytest.raises(openai.UnprocessableEntityError) as no_user_message:
        await root_client(mesh, agent.owner.token).chat.completions.create(
            model=agent.model, messages=[{"role": "system", "content": "only a system prompt"}]
        )
    assert no_user_message.value.body["param"] == "messages"  # type: ignore[index]


async def test_openai_error_shape_and_sse_wire_format(http: httpx.AsyncClient, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["wire"])
    response = await http.post(
        "/v1/chat/completions",
        json={"model": "nope/nobody", "messages": [{"role": "user", "content": "x"}]},
        headers=agent.owner.headers,
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "model_not_found"

    body = {
        "model": agent.model,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "temperature": 0.2,  # OpenAI fields agents do not use are accepted and ignored
        "user": "someone",
        "n": 1,
    }
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=agent.owner.headers) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        session_id = stream.headers["x-session-id"]
        raw = (await stream.aread()).decode()
    assert session_id
    events = [block for block in raw.split("\n\n") if block.strip()]
    assert events[-1] == "data: [DONE]"
    # Each chunk: its SSE id (a position to resume from, Last-Event-ID), then its data.
    assert all(e.startswith("id: ") for e in events[:-1])
    payloads = [json.loads(e.split("\ndata: ", 1)[1]) for e in events[:-1]]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(p["object"] == "chat.completion.chunk" and p["model"] == agent.model for p in payloads)
    assert len({p["id"] for p in payloads}) == 1


async def test_sessions_come_from_header_or_body_and_are_returned(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=["ok"])
    url = f"{agent.base}/v1/chat/completions"
    message = {"messages": [{"role": "user", "content": "remember me"}]}
    fresh = await http.post(url, json=message, headers=agent.owner.headers)
    assert fresh.status_code == 200
    generated = fresh.headers["X-Session-Id"]
    assert generated

    by_header = await http.post(
        url, json=message, headers={**agent.owner.headers, "X-Session-Id": "chosen-1"}
    )
    assert by_header.headers["X-Session-Id"] == "chosen-1"
    by_body = await http.post(url, json={**message, "session_id": "chosen-2"}, headers=agent.owner.headers)
    assert by_body.headers["X-Session-Id"] == "chosen-2"

    events = await api.session_events(agent, "chosen-1")
    assert [e["event_type"] for e in events] == ["user_message", "agent_response"]
    assert events[0]["content"] == "remember me"

    bad = await http.post(url, json=message, headers={**agent.owner.headers, "X-Session-Id": "no spaces!"})
    assert bad.status_code == 422
    assert bad.json()["error"]["param"] == "session_id"


async def test_fifty_concurrent_chats_all_answer(mesh: Mesh, api: Api) -> None:
    agent = await api.agent()  # the mock model echoes its input
    client = root_client(mesh, agent.owner.token)

    async def chat(index: int) -> str:
        if index % 2:
            completion = await client.chat.completions.create(
                model=agent.model, messages=[{"role": "user", "content": f"message {index}"}]
            )
            return completion.choices[0].message.content or ""
        stream = await client.chat.completions.create(
            model=agent.model, messages=[{"role": "user", "content": f"message {index}"}], stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    answers = await asyncio.gather(*(chat(i) for i in range(50)))
    assert answers == [f"message {i}" for i in range(50)]


async def test_the_stream_says_exactly_the_plain_reply_not_the_coordinators_words_before_delegating(
    mesh: Mesh, api: Api, once: None
) -> None:
    """A coordinator's text before it delegated is not its answer, streamed or not."""
    worker = await api.agent(name="worker", mock_responses=["Forty-two, says the worker."])
    owner, project = worker.owner, {"id": worker.project_id, "slug": worker.project_slug}
    delegating = 'I will ask the worker.\n```delegate\n{"agent": "worker", "task": "the answer"}\n```'
    answer = "The worker has answered: forty-two, in several words of text."
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project=project,
        mock_responses=[delegating, answer],
        network_access=["worker"],
    )
    client = root_client(mesh, owner.token)
    messages = [{"role": "user", "content": "What is the answer?"}]

    completion = await client.chat.completions.create(model=coordinator.model, messages=messages)
    plain = completion.choices[0].message.content
    assert plain == answer

    stream = await client.chat.completions.create(model=coordinator.model, messages=messages, stream=True)
    chunks = [chunk async for chunk in stream]
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == plain
    assert "ask the worker" not in streamed and "says the worker" not in streamed
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
