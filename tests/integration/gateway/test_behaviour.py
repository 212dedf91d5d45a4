"""The gateway's behaviour, once, over every face: each test runs over REST/HTTP (httpx) and over
the public gRPC API through the same small transport interface (transports.py), with the same
assertions — a status is compared as what it means (NOT_FOUND ↔ 404, …). Behaviour does not
depend on the database: these run on SQLite only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Agent, Api, suffix
from tests.integration.gateway.transports import (
    Failure,
    GrpcTransport,
    Refused,
    RestTransport,
    Stream,
    Transport,
)
from tests.polling import eventually

# Streams for several seconds unless cancelled.
SLOW = {"content": "slowly " * 180, "delay_seconds": 0.25}


@pytest_asyncio.fixture(loop_scope="package", params=["rest", "grpc"])
async def transport(
    request: pytest.FixtureRequest, mesh: Mesh, http: httpx.AsyncClient, once: None
) -> AsyncIterator[Transport]:
    if request.param == "rest":
        yield RestTransport(http)
        return
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield GrpcTransport(channel)


async def _last(stream: AsyncIterator[Stream]) -> Stream:
    last = None
    async for last in stream:  # noqa: B007
        pass
    assert last is not None
    return last


async def test_a_chat_answers_with_the_agents_answer(transport: Transport, api: Api) -> None:
    agent = await api.agent(mock_responses=["the answer"])
    answer = await transport.chat(agent.owner, agent, "a question")
    assert answer.content == "the answer"
    assert answer.session_id
    # The session goes on where the client names it.
    again = await transport.chat(agent.owner, agent, "another", answer.session_id)
    assert again.session_id == answer.session_id


async def test_a_stream_carries_the_answer_in_order_and_then_ends(transport: Transport, api: Api) -> None:
    text = "one two three four five six seven eight nine ten " * 4
    agent = await api.agent(mock_responses=[text])
    session_id = f"stream-{suffix()}"
    streamed = await _last(transport.stream(agent.owner, agent, "go", session_id))
    assert streamed.session_id == session_id
    assert streamed.ending == "completed"
    assert "".join(streamed.texts).strip() == text.strip()

    events, _ = await transport.events(agent.owner, agent.project_id, session_id, page_size=100)
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    types = [e.event_type for e in events]
    assert (types[0], types[-1]) == ("user_message", "agent_response")
    assert {e.agent for e in events} == {agent.name}


async def test_session_events_page_in_seq_order(transport: Transport, api: Api) -> None:
    agent = await api.agent(mock_responses=["ok"])
    session_id = f"paging-{suffix()}"
    for turn in range(3):
        await transport.chat(agent.owner, agent, f"turn {turn}", session_id)
    everything, last_token = await transport.events(agent.owner, agent.project_id, session_id, page_size=1000)
    assert last_token == ""
    assert len(everything) == 6  # each turn: user_message, agent_response

    paged, token = [], ""
    while True:
        page, token = await transport.events(
            agent.owner, agent.project_id, session_id, page_size=4, page_token=token
        )
        assert len(page) <= 4
        paged.extend(page)
        if not token:
            break
    assert paged == everything
    assert [e.seq for e in paged] == list(range(paged[0].seq, paged[0].seq + 6))


async def test_pause_resume_and_terminate(transport: Transport, api: Api) -> None:
    agent = await api.agent(mock_responses=["ok"])
    assert await transport.pause(agent.owner, agent) == "paused"
    with pytest.raises(Refused) as paused:
        await transport.chat(agent.owner, agent, "hello")
    assert paused.value.failure == Failure.INVALID_STATE
    assert await transport.resume(agent.owner, agent) == "idle"
    assert (await transport.chat(agent.owner, agent, "hello")).content == "ok"

    await transport.terminate(agent.owner, agent)
    assert await transport.status(agent.owner, agent) == "terminated"
    with pytest.raises(Refused) as terminated:
        await transport.chat(agent.owner, agent, "hello")
    assert terminated.value.failure == Failure.INVALID_STATE
    with pytest.raises(Refused) as resumed:
        await transport.resume(agent.owner, agent)
    assert resumed.value.failure == Failure.INVALID_STATE


async def test_terminating_cancels_the_run_in_flight(transport: Transport, api: Api) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    session_id = f"terminate-{suffix()}"
    stream = transport.stream(agent.owner, agent, "go", session_id)
    first = await anext(stream)
    assert first.texts and not first.ending  # the run is in flight
    await transport.terminate(agent.owner, agent)
    ended = await _last(stream)
    assert ended.ending == "failed"

    async def recorded() -> bool:
        events, _ = await transport.events(agent.owner, agent.project_id, session_id, page_size=1000)
        return bool(events) and events[-1].event_type == "error"

    await eventually(recorded, what="the cancelled run is recorded")
    events, _ = await transport.events(agent.owner, agent.project_id, session_id, page_size=1000)
    assert "agent_response" not in [e.event_type for e in events]


async def test_an_unknown_agent_is_not_found(transport: Transport, api: Api) -> None:
    agent = await api.agent()
    unknown = Agent(agent.project_id, agent.project_slug, "0" * 32, f"nobody-{suffix()}", agent.owner)
    with pytest.raises(Refused) as chat:
        await transport.chat(agent.owner, unknown, "hello")
    assert chat.value.failure == Failure.NOT_FOUND
    with pytest.raises(Refused) as status:
        await transport.status(agent.owner, unknown)
    assert status.value.failure == Failure.NOT_FOUND


async def test_another_users_project_is_refused(transport: Transport, api: Api) -> None:
    agent = await api.agent(mock_responses=["private"])
    session_id = (await transport.chat(agent.owner, agent, "hello")).session_id
    stranger = await api.user()
    refused = {Failure.NOT_FOUND, Failure.FORBIDDEN}
    attempts = {
        "chat": transport.chat(stranger, agent, "hello"),
        "status": transport.status(stranger, agent),
        "pause": transport.pause(stranger, agent),
        "terminate": transport.terminate(stranger, agent),
        "events": transport.events(stranger, agent.project_id, session_id, page_size=10),
    }
    for what, attempt in attempts.items():
        with pytest.raises(Refused) as raised:
            await attempt
        assert raised.value.failure in refused, what
    # Nothing changed for the owner.
    assert await transport.status(agent.owner, agent) == "idle"
