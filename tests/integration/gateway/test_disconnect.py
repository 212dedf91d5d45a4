"""A client that goes away mid-chat cancels the run below: the agent is idle again and the run is
recorded as cancelled (an `error` event with `cancelled: true`), never answered."""

from __future__ import annotations

import asyncio

import httpx

from tests.integration.gateway.support import Agent, Api, suffix
from tests.polling import eventually

# About 20 chunks, a quarter second apart: the run outlasts the test by far unless cancelled.
SLOW = {"content": "slowly " * 180, "delay_seconds": 0.25}


async def assert_cancelled(api: Api, agent: Agent, session_id: str) -> None:
    """The session's run was cancelled: the agent is idle, the run recorded as cancelled."""

    async def idle() -> bool:
        return await api.status(agent) == "idle"

    await eventually(idle, what="the agent is idle again")

    async def recorded() -> bool:
        events = await api.session_events(agent, session_id)
        return bool(events) and events[-1]["event_type"] == "error"

    await eventually(recorded, what="the cancelled run is recorded")
    events = await api.session_events(agent, session_id)
    assert events[-1]["metadata"]["cancelled"] is True
    assert "agent_response" not in [e["event_type"] for e in events]


async def test_disconnect_mid_stream_cancels_the_run(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    session_id = f"gone-{suffix()}"
    body = {"model": agent.model, "messages": [{"role": "user", "content": "tell me slowly"}], "stream": True}
    async with http.stream(
        "POST", "/v1/chat/completions", json=body, headers={**agent.owner.headers, "X-Session-Id": session_id}
    ) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if '"content": "slowly' in line:
                break
        # What the session recorded so far says why, should the run not be in flight.
        assert await api.status(agent) == "working", await api.session_events(agent, session_id)
    # Leaving the block with the body unread closes the connection: the client is gone.
    await assert_cancelled(api, agent, session_id)


async def test_disconnect_while_waiting_for_a_plain_answer_cancels_the_run(mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    session_id = f"gone-plain-{suffix()}"
    async with httpx.AsyncClient(base_url=mesh.gateway.http.url) as client:
        request = asyncio.create_task(
            client.post(
                f"{agent.base}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "answer slowly"}]},
                headers={**agent.owner.headers, "X-Session-Id": session_id},
            )
        )

        async def started() -> bool:
            # Its input recorded: a run cancelled before that leaves nothing in the log (the
            # registry marks the agent working a little earlier, while it takes the turn).
            try:
                return bool(await api.session_events(agent, session_id))
            except AssertionError:  # no session yet
                return False

        await eventually(started, what="the run started")
        request.cancel()  # drops the connection
        await asyncio.gather(request, return_exceptions=True)
    await assert_cancelled(api, agent, session_id)
