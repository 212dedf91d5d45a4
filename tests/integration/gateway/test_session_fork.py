"""Forking a session (DESIGN §12) through the gateway's REST and public gRPC faces, on both
databases: a fork answers from the forked history only — the scripted model's prompt shows it —
and the source goes on unchanged."""

from __future__ import annotations

import grpc
import httpx
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from tests.integration.gateway.support import Agent, Api, suffix

ECHO = {"echo_prompt": True}


async def chat(http: httpx.AsyncClient, agent: Agent, session_id: str, message: str) -> str:
    response = await http.post(
        f"{agent.base}/v1/chat/completions",
        json={"model": agent.model, "messages": [{"role": "user", "content": message}]},
        headers={**agent.owner.headers, "X-Session-Id": session_id},
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def fork_url(agent: Agent, session_id: str) -> str:
    return f"/api/v1/projects/{agent.project_id}/sessions/{session_id}/fork"


async def test_a_fork_answers_from_the_forked_history_only(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=[ECHO])
    source = f"s-{suffix()}"
    await chat(http, agent, source, "first")
    events = await api.session_events(agent, source)
    at_seq = events[-1]["seq"]  # the end of the first exchange
    await chat(http, agent, source, "second")
    source_events = await api.session_events(agent, source)

    response = await http.post(fork_url(agent, source), json={"at_seq": at_seq}, headers=agent.owner.headers)
    assert response.status_code == 201, response.text
    fork = response.json()
    assert fork["forked_from_session_id"] == source and fork["forked_at_seq"] == at_seq
    assert fork["last_seq"] == at_seq and fork["id"] != source

    # The fork's history is the source's up to at_seq, under the fork's id, then its own.
    inherited = await api.session_events(agent, fork["id"])
    assert [e["id"] for e in inherited] == [e["id"] for e in events]
    assert {e["session_id"] for e in inherited} == {fork["id"]}
    prompt = await chat(http, agent, fork["id"], "third")
    assert "first" in prompt and "third" in prompt and "second" not in prompt
    own = (await api.session_events(agent, fork["id"]))[len(events) :]
    assert own and own[0]["seq"] == at_seq + 1

    # The source is untouched, and goes on from its own history.
    assert await api.session_events(agent, source) == source_events
    prompt = await chat(http, agent, source, "fourth")
    assert "second" in prompt and "third" not in prompt


async def test_a_fork_of_a_fork_reads_through_both(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=[ECHO])
    source = f"s-{suffix()}"
    await chat(http, agent, source, "alpha")
    first_end = (await api.session_events(agent, source))[-1]["seq"]
    response = await http.post(
        fork_url(agent, source),
        json={"at_seq": first_end, "session_id": f"f-{suffix()}"},
        headers=agent.owner.headers,
    )
    child = response.json()["id"]
    await chat(http, agent, child, "beta")
    child_end = (await api.session_events(agent, child))[-1]["seq"]
    await chat(http, agent, child, "gamma")
    response = await http.post(
        fork_url(agent, child), json={"at_seq": child_end}, headers=agent.owner.headers
    )
    assert response.status_code == 201, response.text
    grandchild = response.json()["id"]
    prompt = await chat(http, agent, grandchild, "delta")
    assert all(word in prompt for word in ("alpha", "beta", "delta")) and "gamma" not in prompt
    seqs = [e["seq"] for e in await api.session_events(agent, grandchild)]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_bad_forks_are_refused_clearly(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["ok"])
    source = f"s-{suffix()}"
    await chat(http, agent, source, "hi")
    last = (await api.session_events(agent, source))[-1]["seq"]
    headers = agent.owner.headers

    beyond = await http.post(fork_url(agent, source), json={"at_seq": last + 1}, headers=headers)
    assert beyond.status_code == 400 and "beyond" in beyond.json()["detail"], beyond.text
    unknown = await http.post(fork_url(agent, "no-such-session"), json={"at_seq": 1}, headers=headers)
    assert unknown.status_code == 404, unknown.text
    taken = await http.post(
        fork_url(agent, source), json={"at_seq": 1, "session_id": source}, headers=headers
    )
    assert taken.status_code == 409, taken.text
    zero = await http.post(fork_url(agent, source), json={"at_seq": 0}, headers=headers)
    assert zero.status_code == 422, zero.text
    # Permissions follow the project: another user sees no such session.
    stranger = await api.user()
    foreign = await http.post(fork_url(agent, source), json={"at_seq": 1}, headers=stranger.headers)
    assert foreign.status_code in (403, 404), foreign.text


async def test_fork_on_the_public_grpc_face(api: Api, http: httpx.AsyncClient, mesh: Mesh) -> None:
    agent = await api.agent(mock_responses=["ok"])
    source = f"s-{suffix()}"
    await chat(http, agent, source, "hi")
    metadata = (("authorization", agent.owner.headers["Authorization"]),)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = mem_grpc.MemoryServiceStub(channel)
        request = mem.ForkSessionRequest(session_id=source, project_id=agent.project_id, at_seq=1)
        fork = (await stub.ForkSession(request, metadata=metadata)).session
        assert fork.forked_from_session_id == source and fork.forked_at_seq == 1 and fork.last_seq == 1
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ForkSession(
                mem.ForkSessionRequest(session_id=source, project_id=agent.project_id, at_seq=99),
                metadata=metadata,
            )
        assert refused.value.code() == grpc.StatusCode.OUT_OF_RANGE
