"""A deleted project is closed at once: caches along the chat path (the
gateway's passed ownership checks, the executor's resolved agents) never let a chat reach it, its
sessions and events are erased, open watch streams on them end, and nothing can be appended to
it. And sessions are their project's: two projects may use one session id."""

from __future__ import annotations

import asyncio

import grpc
import openai
import pytest
from openai import AsyncOpenAI

from agentmesh.cli.mesh import Mesh
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentmesh.memory.v1 import resources_pb2 as mem_resources
from agentmesh.runtime.errors import NotFound
from tests.bearer import authorized_channel
from tests.integration.gateway.support import Agent, Api, suffix
from tests.mesh import bearer


async def test_a_deleted_project_refuses_chats_at_once(mesh: Mesh, api: Api) -> None:
    agent = await api.agent(mock_responses=["still here"])
    client = AsyncOpenAI(base_url=f"{mesh.gateway.http.url}/v1", api_key=agent.owner.token, max_retries=0)
    question = [{"role": "user", "content": "Are you there?"}]
    answer = await client.chat.completions.create(model=agent.model, messages=question)
    assert answer.choices[0].message.content == "still here"

    deleted = await api.http.delete(f"/api/v1/projects/{agent.project_id}", headers=agent.owner.headers)
    assert deleted.status_code in (200, 204), deleted.text

    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model=agent.model, messages=question)
    listed = await api.http.get(f"/api/v1/projects/{agent.project_id}/agents", headers=agent.owner.headers)
    assert listed.status_code == 404


async def _chat(api: Api, agent: Agent, session_id: str, content: str) -> str:
    response = await api.http.post(
        f"{agent.base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": content}], "session_id": session_id},
        headers=agent.owner.headers,
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def _note(session_id: str, project_id: str) -> mem.AppendEventsRequest:
    event = mem.NewEvent(agent="client", event_type=mem_resources.EVENT_TYPE_USER_MESSAGE, content="late")
    return mem.AppendEventsRequest(session_id=session_id, project_id=project_id, events=[event])


async def test_a_deleted_projects_sessions_are_cut_off_erased_and_their_watches_closed(
    mesh: Mesh, api: Api
) -> None:
    agent = await api.agent(mock_responses=["remembered"])
    session_id = f"doomed-{suffix()}"
    assert await _chat(api, agent, session_id, "remember this") == "remembered"
    owner = bearer(agent.owner.token)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        memory = mem_grpc.MemoryServiceStub(channel)
        # Grants remembered for the owner (the gateway caches passed checks for seconds).
        listed = await memory.ListEvents(
            mem.ListEventsRequest(session_id=session_id, project_id=agent.project_id), metadata=owner
        )
        assert [e.content for e in listed.events] == ["remember this", "remembered"]
        watch = memory.WatchEvents(
            mem.WatchEventsRequest(session_id=session_id, project_id=agent.project_id), metadata=owner
        )
        watched = aiter(watch)
        assert (await anext(watched)).event.content == "remember this"
        assert (await anext(watched)).event.content == "remembered"

        deleted = await api.http.delete(f"/api/v1/projects/{agent.project_id}", headers=agent.owner.headers)
        assert deleted.status_code in (200, 204), deleted.text

        # The open stream ends, NOT_FOUND: no poll interval to sit out on this replica.
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async with asyncio.timeout(30):
                await anext(watched)
        assert ended.value.code() == grpc.StatusCode.NOT_FOUND
        # At once, whatever the gateway remembers: nothing to read, nothing to write.
        for call, request in [
            (memory.ListEvents, mem.ListEventsRequest(session_id=session_id, project_id=agent.project_id)),
            (memory.GetSession, mem.GetSessionRequest(session_id=session_id, project_id=agent.project_id)),
            (memory.AppendEvents, _note(session_id, agent.project_id)),
            (memory.AppendEvents, _note(f"new-{suffix()}", agent.project_id)),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(request, metadata=owner)
            assert refused.value.code() == grpc.StatusCode.NOT_FOUND, (call, refused.value.details())

    # Erased, not hidden: the memory service itself holds nothing of the project.
    channel = authorized_channel(mesh.services["memory"].address)
    try:
        internal = MemoryClient(channel)
        assert (await internal.list_sessions(agent.project_id)).sessions == []
        with pytest.raises(NotFound):
            await internal.get_session(session_id, project_id=agent.project_id)
    finally:
        await channel.close()


async def test_two_projects_may_use_the_same_session_id_without_meeting(api: Api) -> None:
    """A client-chosen session id is its project's; another tenant choosing the
    same id neither collides with it nor learns it exists."""
    mine = await api.agent(mock_responses=["mine"])
    theirs = await api.agent(mock_responses=["theirs"])
    session_id = f"shared-{suffix()}"

    assert await _chat(api, mine, session_id, "first") == "mine"
    assert await _chat(api, theirs, session_id, "second") == "theirs"
    assert await _chat(api, mine, session_id, "third") == "mine"

    assert [e["content"] for e in await api.session_events(mine, session_id)] == [
        "first",
        "mine",
        "third",
        "mine",
    ]
    assert [e["content"] for e in await api.session_events(theirs, session_id)] == ["second", "theirs"]
    for agent in (mine, theirs):
        sessions = await api.http.get(
            f"/api/v1/projects/{agent.project_id}/sessions", headers=agent.owner.headers
        )
        assert [s["id"] for s in sessions.json()["data"]] == [session_id]
