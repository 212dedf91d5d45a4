"""The MCP server part of the RegistryStore contract, over every implementation (in memory,
SQLite, PostgreSQL): servers round-trip whole (secrets included: the store is inside the
registry), names are unique per scope, request ids once, lists page by keyset, and a project's
servers go with it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.registry.errors import McpServerNameTaken
from agentmesh.registry.models import NewUser, PageRequest, Project, RegisteredMcpServer
from agentmesh.registry.store import DuplicateRequest, RegistryStore

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _server(name: str = "kb", project_id: str = "", at: datetime = T0) -> RegisteredMcpServer:
    return RegisteredMcpServer(
        id=str(uuid.uuid4()),
        project_id=project_id,
        name=name,
        transport="streamable_http",
        url="https://kb.example.com/mcp",
        headers={"Authorization": "Bearer token-1"},
        env={"A": "1"},
        args=["-v"],
        created_at=at,
        updated_at=at,
    )


async def _project(store: RegistryStore) -> Project:
    user_id = str(uuid.uuid4())
    project = Project(
        id=str(uuid.uuid4()),
        name="P",
        slug=f"p-{user_id[:8]}",
        owner_id=user_id,
        created_at=T0,
        updated_at=T0,
    )
    async with store.write() as tx:
        await tx.insert_user(
            NewUser(email=f"{user_id}@example.com"), user_id=user_id, password_hash="h", now=T0
        )
        await tx.insert_project(project, request_id=None)
    return project


async def test_servers_round_trip_and_are_unique_per_scope(registry_store: RegistryStore) -> None:
    project = await _project(registry_store)
    server = _server()
    async with registry_store.write() as tx:
        await tx.insert_mcp_server(server, request_id="r1")
        await tx.insert_mcp_server(_server(project_id=project.id), request_id=None)  # another scope
    async with registry_store.read() as tx:
        assert await tx.get_mcp_server(server_id=server.id) == server
        assert await tx.get_mcp_server(scoped_name=("", "kb")) == server
        assert await tx.get_mcp_server(request_id="r1") == server
        assert (await tx.get_mcp_server(scoped_name=(project.id, "kb"))).project_id == project.id
        assert await tx.get_mcp_server(scoped_name=("", "nope")) is None
    with pytest.raises(McpServerNameTaken):
        async with registry_store.write() as tx:
            await tx.insert_mcp_server(_server(), request_id=None)
    with pytest.raises(DuplicateRequest):
        async with registry_store.write() as tx:
            await tx.insert_mcp_server(_server(name="other"), request_id="r1")

    renamed = server.model_copy(update={"name": "kb2", "env": {"B": "2"}})
    async with registry_store.write() as tx:
        await tx.update_mcp_server(renamed)
    async with registry_store.read() as tx:
        assert await tx.get_mcp_server(server_id=server.id) == renamed
    other = _server(name="other")
    async with registry_store.write() as tx:
        await tx.insert_mcp_server(other, request_id=None)
    with pytest.raises(McpServerNameTaken):
        async with registry_store.write() as tx:
            await tx.update_mcp_server(other.model_copy(update={"name": "kb2"}))

    async with registry_store.write() as tx:
        await tx.delete_project(project.id)
        await tx.delete_mcp_server(server.id)
        await tx.delete_mcp_server(other.id)
    async with registry_store.read() as tx:
        assert (await tx.list_mcp_servers(None, PageRequest(size=10))).total == 0


async def test_servers_list_by_keyset_and_by_project(registry_store: RegistryStore) -> None:
    project = await _project(registry_store)
    made = [_server(name=f"s{i}", at=T0 + timedelta(seconds=i)) for i in range(3)]
    async with registry_store.write() as tx:
        for server in made:
            await tx.insert_mcp_server(server, request_id=None)
        mine = _server(name="mine", project_id=project.id, at=T0 + timedelta(seconds=9))
        await tx.insert_mcp_server(mine, request_id=None)
    async with registry_store.read() as tx:
        first = await tx.list_mcp_servers(None, PageRequest(size=2))
        rest = await tx.list_mcp_servers(None, PageRequest(size=2, after=(made[1].created_at, made[1].id)))
        skipped = await tx.list_mcp_servers(None, PageRequest(size=2, skip=2))
        mine = await tx.list_mcp_servers(project.id, PageRequest(size=10))
    assert [s.name for s in first.items] == ["s0", "s1"] and first.has_more and first.total == 4
    assert [s.name for s in rest.items] == ["s2", "mine"] == [s.name for s in skipped.items]
    assert [s.name for s in mine.items] == ["mine"] and mine.total == 1
