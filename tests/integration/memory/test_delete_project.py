"""Erasing a deleted project's sessions over a real server, on SQLite and PostgreSQL: the
events go at once, open watch streams on them end, later appends are refused, and
only the mesh's own services may ask for it."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import NotFound, PermissionDenied
from agentmesh.runtime.identity import Principal, TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel
from tests.integration.memory.builders import new_event
from tests.mesh import JWT_SECRET


async def test_deleting_a_project_erases_its_sessions_and_ends_their_watches(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-gone", [new_event("one"), new_event("two")])
    await memory.append_events("s-2", "p-gone", [new_event("three")])
    await memory.append_events("s-1", "p-kept", [new_event("kept")])
    watched: list[str] = []
    started = asyncio.Event()

    async def watch() -> None:
        async for event in memory.watch_events("s-1", project_id="p-gone"):
            watched.append(event.content)
            if len(watched) == 2:
                started.set()

    watcher = asyncio.create_task(watch())
    async with asyncio.timeout(30):
        await started.wait()

    assert await memory.delete_project_sessions("p-gone") == 2

    with pytest.raises(NotFound):
        async with asyncio.timeout(30):  # a wake-up, not the poll: at once in this process
            await watcher
    assert watched == ["one", "two"]
    with pytest.raises(NotFound):
        await memory.get_session("s-1", project_id="p-gone")
    assert (await memory.list_sessions("p-gone")).sessions == []
    with pytest.raises(NotFound) as refused:
        await memory.append_events("s-3", "p-gone", [new_event("late")])
    assert refused.value.reason == "PROJECT_DELETED"
    kept = pb.ListEventsRequest(session_id="s-1", project_id="p-kept")
    assert [e.content async for e in memory.iter_events(kept)] == ["kept"]
    assert await memory.delete_project_sessions("p-gone") == 0  # again: nothing left, no error


async def test_only_the_mesh_may_erase_a_project(memory_service: RunningService) -> None:
    user = TokenCodec(JWT_SECRET).issue(Principal(user_id="u-1", email="u@example.com"))
    channel = authorized_channel(memory_service.address, user)
    try:
        as_user = MemoryClient(channel)
        await as_user.append_events("s-1", "p-1", [new_event("mine")])
        with pytest.raises(PermissionDenied):
            await as_user.delete_project_sessions("p-1")
        assert (await as_user.get_session("s-1", project_id="p-1")).last_seq == 1
    finally:
        await channel.close()
