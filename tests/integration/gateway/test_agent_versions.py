"""Agent versions (DESIGN §12) through the gateway's REST face, on both databases: a change of an
agent or its type makes a version; a session keeps answering from the version it started on —
the scripted model's answers differ between versions — while a new session gets the latest,
until the session is moved (or every session of the agent is); a delegation runs the worker's
version pinned in its session; another project's agent's versions are not found."""

from __future__ import annotations

from typing import Any

import grpc
import httpx
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from tests.integration.gateway.delegating import delegating_agents
from tests.integration.gateway.support import Agent, Api, suffix


async def chat(http: httpx.AsyncClient, agent: Agent, session_id: str) -> str:
    response = await http.post(
        f"{agent.base}/v1/chat/completions",
        json={"model": agent.model, "messages": [{"role": "user", "content": "which are you?"}]},
        headers={**agent.owner.headers, "X-Session-Id": session_id},
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


async def versions(http: httpx.AsyncClient, agent: Agent) -> list[dict[str, Any]]:
    response = await http.get(f"{agent.path}/versions", headers=agent.owner.headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def move(http: httpx.AsyncClient, agent: Agent, session_id: str, version: object) -> httpx.Response:
    return await http.post(
        f"/api/v1/projects/{agent.project_id}/sessions/{session_id}/move",
        json={"version": version},
        headers=agent.owner.headers,
    )


async def test_a_session_keeps_its_version_until_moved(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["answer one"])
    before = f"s-{suffix()}"
    assert await chat(http, agent, before) == "answer one"

    response = await http.patch(
        agent.path, json={"config": {"mock_responses": ["answer two"]}}, headers=agent.owner.headers
    )
    assert response.status_code == 200, response.text
    listed = await versions(http, agent)
    assert [v["number"] for v in listed] == [2, 1]
    assert listed[0]["config"]["mock_responses"] == ["answer two"] and listed[0]["created_by"]
    response = await http.get(f"{agent.path}/versions/1", headers=agent.owner.headers)
    assert response.status_code == 200 and response.json()["config"]["mock_responses"] == ["answer one"]

    # The session started before the change keeps its version; a new one gets the latest.
    assert await chat(http, agent, before) == "answer one"
    assert await chat(http, agent, f"s-{suffix()}") == "answer two"

    response = await move(http, agent, before, "latest")
    assert response.status_code == 200, response.text
    assert response.json()["versions"] == [{"agent_id": agent.id, "version": 2}]
    assert await chat(http, agent, before) == "answer two"
    assert (await move(http, agent, before, 1)).status_code == 200
    assert await chat(http, agent, before) == "answer one"
    response = await move(http, agent, before, 9)
    assert response.status_code == 404, response.text


async def test_a_change_of_the_type_versions_its_agents(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=["answer"])
    response = await http.get(agent.path, headers=agent.owner.headers)
    type_id = response.json()["agent_type_id"]
    response = await http.patch(
        f"/api/v1/agent-types/{type_id}",
        json={"personality_prompt": "You are the second of your kind."},
        headers=(await api.admin()).headers,
    )
    assert response.status_code == 200, response.text
    listed = await versions(http, agent)
    assert [v["number"] for v in listed] == [2, 1]
    assert listed[0]["agent_type"]["personality_prompt"] == "You are the second of your kind."
    assert listed[1]["agent_type"]["personality_prompt"] == "You are a test agent."


async def test_another_projects_agent_versions_are_not_found(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    mine = await api.agent(mock_responses=["mine"])
    theirs = await api.agent(mock_responses=["theirs"])
    for path in (f"{theirs.path}/versions", f"{theirs.path}/versions/1"):
        response = await http.get(path, headers=mine.owner.headers)
        assert response.status_code == 404, response.text
    # Their agent named under my project is not mine either.
    foreign = f"/api/v1/projects/{mine.project_id}/agents/{theirs.id}/versions"
    assert (await http.get(foreign, headers=mine.owner.headers)).status_code == 404
    response = await http.post(
        f"/api/v1/projects/{mine.project_id}/sessions/s-{suffix()}/move",
        json={"version": 1, "agent": theirs.id},
        headers=mine.owner.headers,
    )
    assert response.status_code == 404, response.text


async def test_versions_and_moves_over_grpc(
    api: Api, http: httpx.AsyncClient, mesh: Mesh, once: None
) -> None:
    agent = await api.agent(mock_responses=["answer one"])
    session = f"s-{suffix()}"
    assert await chat(http, agent, session) == "answer one"
    await http.patch(agent.path, json={"config": {"mock_responses": ["two"]}}, headers=agent.owner.headers)
    metadata = (("authorization", f"Bearer {agent.owner.token}"),)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = reg_grpc.RegistryServiceStub(channel)
        listed = await stub.ListAgentVersions(
            reg.ListAgentVersionsRequest(project_id=agent.project_id, agent_id=agent.name, page_size=1),
            metadata=metadata,
        )
        assert (
            [v.number for v in listed.versions] == [2] and listed.total_size == 2 and listed.next_page_token
        )
        rest = await stub.ListAgentVersions(
            reg.ListAgentVersionsRequest(
                project_id=agent.project_id, agent_id=agent.id, page_token=listed.next_page_token
            ),
            metadata=metadata,
        )
        assert [v.number for v in rest.versions] == [1] and not rest.next_page_token
        one = await stub.GetAgentVersion(
            reg.GetAgentVersionRequest(project_id=agent.project_id, agent_id=agent.id, number=1),
            metadata=metadata,
        )
        assert list(one.version.config.mock_responses) == ["answer one"]
        moved = await stub.MoveSession(
            reg.MoveSessionRequest(project_id=agent.project_id, session_id=session, latest=True),
            metadata=metadata,
        )
        assert [(v.agent_id, v.version) for v in moved.versions] == [(agent.id, 2)]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.MoveSession(
                reg.MoveSessionRequest(project_id=agent.project_id, session_id=session), metadata=metadata
            )
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert await chat(http, agent, session) == "two"


async def test_versions_are_compared_and_rolled_back_to(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=["answer one"])
    await http.patch(
        agent.path,
        json={"config": {"mock_responses": ["answer two"], "instructions": "Be brief."}},
        headers=agent.owner.headers,
    )
    response = await http.get(f"{agent.path}/versions/2/diff", headers=agent.owner.headers)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "number": 2,
        "against": 1,
        "changes": [
            {"field": "config.instructions", "before": None, "after": "Be brief."},
            {"field": "config.mock_responses", "before": ["answer one"], "after": ["answer two"]},
        ],
    }
    response = await http.get(f"{agent.path}/versions/1/diff?against=1", headers=agent.owner.headers)
    assert response.json()["changes"] == []
    response = await http.get(f"{agent.path}/versions/2/diff?against=7", headers=agent.owner.headers)
    assert response.status_code == 404, response.text

    response = await http.post(f"{agent.path}/versions/1/restore", headers=agent.owner.headers)
    assert response.status_code == 200, response.text
    restored = response.json()
    assert restored["number"] == 3 and restored["config"]["mock_responses"] == ["answer one"]
    response = await http.get(f"{agent.path}/versions/3/diff?against=1", headers=agent.owner.headers)
    assert response.json()["changes"] == []
    assert await chat(http, agent, f"s-{suffix()}") == "answer one"


async def worker_answers(api: Api, coordinator: Agent, session_id: str) -> list[str]:
    """What the worker answered the coordinator's delegations in the session, oldest first."""
    events = await api.session_events(coordinator, session_id)
    return [e["content"] for e in events if e["agent"] == "worker" and e["event_type"] == "agent_response"]


async def test_a_delegation_runs_the_workers_version_pinned_in_its_session(
    api: Api, http: httpx.AsyncClient, mesh: Mesh, once: None
) -> None:
    worker, coordinator = await delegating_agents(api, worker_answer="worker one")
    started = f"s-{suffix()}"
    assert await chat(http, coordinator, started) == "done"
    assert await worker_answers(api, coordinator, started) == ["worker one"]

    response = await http.patch(
        worker.path, json={"config": {"mock_responses": ["worker two"]}}, headers=worker.owner.headers
    )
    assert response.status_code == 200, response.text
    # The session that delegated before the change keeps the worker's version; a new one gets
    # the latest.
    assert await chat(http, coordinator, started) == "done"
    assert await worker_answers(api, coordinator, started) == ["worker one", "worker one"]
    fresh = f"s-{suffix()}"
    assert await chat(http, coordinator, fresh) == "done"
    assert await worker_answers(api, coordinator, fresh) == ["worker two"]

    # Every session of the worker moved at once: only the one on the old version moves.
    response = await http.post(
        f"{worker.path}/sessions/move", json={"version": "latest"}, headers=worker.owner.headers
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"agent_id": worker.id, "version": 2, "moved_sessions": 1, "sessions": 2}
    assert await chat(http, coordinator, started) == "done"
    assert (await worker_answers(api, coordinator, started))[-1] == "worker two"

    metadata = (("authorization", f"Bearer {worker.owner.token}"),)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = reg_grpc.RegistryServiceStub(channel)
        moved = await stub.MoveAgentSessions(
            reg.MoveAgentSessionsRequest(project_id=worker.project_id, agent_id="worker", version=1),
            metadata=metadata,
        )
        assert (moved.agent_id, moved.version, moved.moved_sessions, moved.sessions) == (worker.id, 1, 2, 2)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.MoveAgentSessions(
                reg.MoveAgentSessionsRequest(project_id=worker.project_id, agent_id=worker.id, version=9),
                metadata=metadata,
            )
        assert refused.value.code() is grpc.StatusCode.NOT_FOUND
    assert await chat(http, coordinator, fresh) == "done"
    assert (await worker_answers(api, coordinator, fresh))[-1] == "worker one"
    response = await http.post(
        f"{worker.path}/sessions/move", json={"version": "newest"}, headers=worker.owner.headers
    )
    assert response.status_code == 422, response.text
