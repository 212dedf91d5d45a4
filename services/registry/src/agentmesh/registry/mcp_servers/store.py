"""Storing registered MCP servers: the transaction methods (`McpServerTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. A server is unique by (`project_id`, `name`), `project_id` '' being global."""

from __future__ import annotations

import abc
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.errors import DuplicateRequest, McpServerNameTaken
from agentmesh.registry.in_memory_state import State
from agentmesh.registry.models import PageRequest, RegisteredMcpServer, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.tables import McpServerRow


class McpServerTransaction(abc.ABC):
    """The MCP server operations of one transaction. Reads return None for what does not exist;
    a taken name raises McpServerNameTaken, a used request id DuplicateRequest."""

    @abc.abstractmethod
    async def insert_mcp_server(
        self, server: RegisteredMcpServer, *, request_id: str | None
    ) -> RegisteredMcpServer: ...

    @abc.abstractmethod
    async def get_mcp_server(
        self,
        *,
        server_id: str | None = None,
        scoped_name: tuple[str, str] | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> RegisteredMcpServer | None:
        """By id, by (project_id, name) — project_id '' for a global one —, or by request id."""

    @abc.abstractmethod
    async def list_mcp_servers(self, project_id: str | None, page: PageRequest) -> Slice[RegisteredMcpServer]:
        """All servers (None), or one project's, in (`created_at`, `id`) order."""

    @abc.abstractmethod
    async def update_mcp_server(self, server: RegisteredMcpServer) -> RegisteredMcpServer: ...

    @abc.abstractmethod
    async def delete_mcp_server(self, server_id: str) -> None: ...


def _name_taken(server: RegisteredMcpServer) -> McpServerNameTaken:
    scope = "this project" if server.project_id else "the global servers"
    return McpServerNameTaken(f"an MCP server named {server.name!r} exists in {scope}")


def _values(server: RegisteredMcpServer) -> dict[str, Any]:
    return server.model_dump()


class SqlMcpServers(McpServerTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers
    (`_insert`, `_update`, `_one`, `_slice`) it uses."""

    _session: AsyncSession

    async def insert_mcp_server(
        self, server: RegisteredMcpServer, *, request_id: str | None
    ) -> RegisteredMcpServer:
        row = McpServerRow(**_values(server), request_id=request_id)
        await self._insert(row, {"name": _name_taken(server), "request_id": DuplicateRequest()})  # type: ignore[attr-defined]
        return server

    async def get_mcp_server(
        self,
        *,
        server_id: str | None = None,
        scoped_name: tuple[str, str] | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> RegisteredMcpServer | None:
        statement = sa.select(McpServerRow)
        if server_id is not None:
            statement = statement.where(McpServerRow.id == server_id)
        if scoped_name is not None:
            statement = statement.where(
                McpServerRow.project_id == scoped_name[0], McpServerRow.name == scoped_name[1]
            )
        if request_id is not None:
            statement = statement.where(McpServerRow.request_id == request_id)
        row = await self._one(statement, for_update)  # type: ignore[attr-defined]
        return RegisteredMcpServer.model_validate(row, from_attributes=True) if row else None

    async def list_mcp_servers(self, project_id: str | None, page: PageRequest) -> Slice[RegisteredMcpServer]:
        conditions = [] if project_id is None else [McpServerRow.project_id == project_id]
        return await self._slice(McpServerRow, conditions, page, RegisteredMcpServer)  # type: ignore[attr-defined,no-any-return]

    async def update_mcp_server(self, server: RegisteredMcpServer) -> RegisteredMcpServer:
        values = _values(server)
        await self._update(McpServerRow, server.id, values, {"name": _name_taken(server)})  # type: ignore[attr-defined]
        return server

    async def delete_mcp_server(self, server_id: str) -> None:
        await self._session.execute(sa.delete(McpServerRow).where(McpServerRow.id == server_id))

    async def delete_project_mcp_servers(self, project_id: str) -> None:
        """With its project: a project's servers go (no foreign key does it)."""
        await self._session.execute(sa.delete(McpServerRow).where(McpServerRow.project_id == project_id))


class InMemoryMcpServers(McpServerTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's
    `mcp_servers` (id → (server, request id))."""

    _state: State

    @property
    def _servers(self) -> dict[str, tuple[RegisteredMcpServer, str | None]]:
        return self._state.mcp_servers

    async def insert_mcp_server(
        self, server: RegisteredMcpServer, *, request_id: str | None
    ) -> RegisteredMcpServer:
        if request_id is not None and any(stored == request_id for _, stored in self._servers.values()):
            raise DuplicateRequest()
        self._check_name(server)
        self._servers[server.id] = (server, request_id)
        return server

    async def get_mcp_server(
        self,
        *,
        server_id: str | None = None,
        scoped_name: tuple[str, str] | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> RegisteredMcpServer | None:
        for server, stored_request in self._servers.values():
            if (
                (server_id is None or server.id == server_id)
                and (scoped_name is None or (server.project_id, server.name) == scoped_name)
                and (request_id is None or stored_request == request_id)
            ):
                return server
        return None

    async def list_mcp_servers(self, project_id: str | None, page: PageRequest) -> Slice[RegisteredMcpServer]:
        servers = [s for s, _ in self._servers.values() if project_id is None or s.project_id == project_id]
        return keyset_slice(servers, page)

    async def update_mcp_server(self, server: RegisteredMcpServer) -> RegisteredMcpServer:
        if server.id in self._servers:
            self._check_name(server)
            self._servers[server.id] = (server, self._servers[server.id][1])
        return server

    async def delete_mcp_server(self, server_id: str) -> None:
        self._servers.pop(server_id, None)

    async def delete_project_mcp_servers(self, project_id: str) -> None:
        for server_id in [s.id for s, _ in self._servers.values() if s.project_id == project_id]:
            del self._servers[server_id]

    def _check_name(self, server: RegisteredMcpServer) -> None:
        if any(
            (s.project_id, s.name) == (server.project_id, server.name) and s.id != server.id
            for s, _ in self._servers.values()
        ):
            raise _name_taken(server)
