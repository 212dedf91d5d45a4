"""Picking up a broken OpenAI-compatible SSE stream by `Last-Event-ID`: every
chunk carries an id; the same request sent again with the last id received brings what is missing
of the answer — nothing twice — then the finish chunk and `[DONE]`."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.integration.gateway.support import Api, sse_blocks, sse_text, suffix

# A live answer (the agent cannot act, so its text streams as it comes) in many chunks.
LONG = {"content": " ".join(f"w{index}" for index in range(300)), "delay_seconds": 0.02}


async def test_last_event_id_brings_the_rest_of_the_answer_once(http: httpx.AsyncClient, api: Api) -> None:
    agent = await api.agent(mock_responses=[LONG])
    session_id = f"sse-{suffix()}"
    body: dict[str, Any] = {
        "model": agent.model,
        "session_id": session_id,
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
    }
    url = "/v1/chat/completions"
    received = ""
    async with http.stream("POST", url, json=body, headers=agent.owner.headers) as first:
        assert first.status_code == 200
        # The client stops reading after a few words (its connection stays open: the run goes on).
        chunks = first.aiter_text()
        while sse_text(sse_blocks(received.rsplit("\n\n", 1)[0])).count(" ") < 5:
            received += await anext(chunks)
        seen = sse_blocks(received.rsplit("\n\n", 1)[0])
        last_id = seen[-1]["id"]
        resumed = await http.post(url, json=body, headers={**agent.owner.headers, "Last-Event-ID": last_id})
        assert resumed.status_code == 200, resumed.text
    rest = sse_blocks(resumed.text)
    assert rest[-1] == {"data": "[DONE]"}
    assert json.loads(rest[-2]["data"])["choices"][0]["finish_reason"] == "stop"

    log = await api.session_events(agent, session_id)
    answer = next(e["content"] for e in log if e["event_type"] == "agent_response")
    assert sse_text(seen) + sse_text(rest) == answer
    assert 0 < len(sse_text(seen)) < len(answer)

    # Resuming from the very end: nothing more than [DONE].
    again = await http.post(url, json=body, headers={**agent.owner.headers, "Last-Event-ID": rest[-2]["id"]})
    assert sse_blocks(again.text) == [{"data": "[DONE]"}]


async def test_a_bad_last_event_id_is_refused_naming_it(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    body = {"model": agent.model, "messages": [{"role": "user", "content": "x"}], "stream": True}
    response = await http.post(
        "/v1/chat/completions",
        json={**body, "session_id": "s-1"},
        headers={**agent.owner.headers, "Last-Event-ID": "x"},
    )
    assert response.status_code == 422 and response.json()["error"]["param"] == "Last-Event-ID"
    response = await http.post(
        "/v1/chat/completions", json=body, headers={**agent.owner.headers, "Last-Event-ID": "run:1:0"}
    )
    assert response.status_code == 422 and response.json()["error"]["param"] == "session_id"
