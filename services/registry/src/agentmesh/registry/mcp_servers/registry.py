"""MCP servers as a registry resource, and the rule that their secrets are write-only.

Superusers register servers, global or for one project; agent types name them (or define servers
inline). `env` and `headers` values are secrets: every answer but one shows them as `MASK` — an
agent type's inline servers too —, and a write that sends `MASK` back for a key keeps the stored
value, so a read-modify-write never wipes a secret. The one answer with the values is
`resolve_agent_servers`, which only the system principal (executors) may call (see `policy.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from agentmesh.registry.agents.watch import AgentWatch
from agentmesh.registry.errors import (
    AgentNotFound,
    AgentTypeNotFound,
    McpServerNotFound,
    ProjectNotFound,
    ValidationFailed,
)
from agentmesh.registry.models import (
    MCP_SERVER_FIELDS,
    AgentType,
    McpServer,
    Page,
    RegisteredMcpServer,
)
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.store import DuplicateRequest, RegistryStore
from agentmesh.registry.validation import (
    DNS_LABEL_RULE,
    check_mcp_server,
    is_dns_label,
    refuse_egress,
    update_paths,
)
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import FieldViolation

# What reads show for every env and header value; sent back in a write, it keeps the stored value.
MASK = "********"

Clock = Callable[[], datetime]
S = TypeVar("S", bound=McpServer)


def masked(server: S) -> S:
    """The server as answers show it: every env and header value replaced by MASK."""
    if not server.env and not server.headers:
        return server
    return server.model_copy(
        update={
            "env": dict.fromkeys(server.env, MASK),
            "headers": dict.fromkeys(server.headers, MASK),
        }
    )


def masked_type(agent_type: AgentType) -> AgentType:
    """The agent type as answers show it: its inline servers' secrets masked."""
    if not any(server.env or server.headers for server in agent_type.mcp_servers):
        return agent_type
    return agent_type.model_copy(update={"mcp_servers": [masked(s) for s in agent_type.mcp_servers]})


def _kept(new: dict[str, str], old: dict[str, str]) -> dict[str, str]:
    return {key: old[key] if value == MASK and key in old else value for key, value in new.items()}


def with_kept_secrets(new: McpServer, old: McpServer | None) -> McpServer:
    """`new` where a value given as MASK keeps `old`'s value of that key."""
    if old is None:
        return new
    return new.model_copy(update={"env": _kept(new.env, old.env), "headers": _kept(new.headers, old.headers)})


def servers_with_kept_secrets(new: Iterable[McpServer], old: Iterable[McpServer]) -> list[McpServer]:
    """An agent type's new inline servers, each keeping the secrets of the old one of its name."""
    by_name = {server.name: server for server in old}
    return [with_kept_secrets(server, by_name.get(server.name)) for server in new]


def check_registered(server: McpServer, prefix: str) -> list[FieldViolation]:
    """A server to register: its definition, and a name that is a DNS label."""
    violations = check_mcp_server(server, prefix=prefix)
    if server.name and not is_dns_label(server.name):
        violations.append(FieldViolation(f"{prefix}.name", DNS_LABEL_RULE))
    return violations


def _raise_if(violations: list[FieldViolation]) -> None:
    if violations:
        raise ValidationFailed.of(violations)


class McpServerRegistry:
    """Registered MCP servers (superusers; the policy table lets no one else call), and what an
    agent's servers resolve to when it runs."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        clock: Clock,
        watch: AgentWatch | None = None,
        egress: EgressPolicy | None = None,
    ) -> None:
        # A registered server is part of the specs of the agents whose type names it: a change
        # makes every watching executor forget its remembered specs (WatchAgents).
        self._watch = watch or AgentWatch()
        self._store = store
        self._pages = page_tokens
        self._now = clock
        # The executors' egress policy: a server URL it refuses is refused here, when it is given.
        self._egress = egress or EgressPolicy()

    async def create(
        self, server: McpServer, *, project_id: str, request_id: str = ""
    ) -> RegisteredMcpServer:
        _raise_if(check_registered(server, "mcp_server"))
        await self._refuse_egress(server)
        now = self._now()
        record = RegisteredMcpServer(
            **server.model_dump(), id=str(uuid.uuid4()), project_id=project_id, created_at=now, updated_at=now
        )
        try:
            async with self._store.write() as tx:
                if request_id and (existing := await tx.get_mcp_server(request_id=request_id)):
                    return masked(existing)
                # Locked, so a concurrent delete of the project cannot leave this server behind.
                if project_id and await tx.get_project(project_id=project_id, for_update=True) is None:
                    raise ProjectNotFound("project not found")
                inserted = await tx.insert_mcp_server(record, request_id=request_id or None)
            self._watch.reset()
            return masked(inserted)
        except DuplicateRequest:
            async with self._store.read() as tx:
                found = await tx.get_mcp_server(request_id=request_id)
            if found is None:
                raise McpServerNotFound("MCP server not found") from None
            return masked(found)

    async def get(self, *, server_id: str = "", name: str = "", project_id: str = "") -> RegisteredMcpServer:
        if bool(server_id) == bool(name):
            _raise_if([FieldViolation("id", "give exactly one of id and name")])
        async with self._store.read() as tx:
            if server_id:
                found = await tx.get_mcp_server(server_id=server_id)
            else:
                found = await tx.get_mcp_server(scoped_name=(project_id, name))
        if found is None:
            raise McpServerNotFound("MCP server not found")
        return masked(found)

    async def list(
        self, *, project_id: str = "", page_size: int = 0, page_token: str = "", page: int = 0
    ) -> Page[RegisteredMcpServer]:
        scope = f"mcp_servers:{project_id or '*'}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            found = await tx.list_mcp_servers(project_id or None, request)
        items: list[RegisteredMcpServer] = found.items
        token = ""
        if found.has_more and items:
            token = self._pages.token((items[-1].created_at, items[-1].id), scope=scope)
        return Page(items=[masked(item) for item in items], next_page_token=token, total_size=found.total)

    async def update(self, server_id: str, server: McpServer, mask: Iterable[str]) -> RegisteredMcpServer:
        _raise_if([] if server_id else [FieldViolation("mcp_server.id", "is required")])
        paths, violations = update_paths(mask, MCP_SERVER_FIELDS)
        _raise_if(violations)
        async with self._store.write() as tx:
            current = await tx.get_mcp_server(server_id=server_id, for_update=True)
            if current is None:
                raise McpServerNotFound("MCP server not found")
            changed = with_kept_secrets(server, current)
            values = {path: getattr(changed, path) for path in paths}
            updated = current.model_copy(update={**values, "updated_at": self._now()})
            _raise_if(check_registered(updated, "mcp_server"))
            if "url" in paths or "transport" in paths:
                await self._refuse_egress(updated)
            updated = await tx.update_mcp_server(updated)
        self._watch.reset()
        return masked(updated)

    async def _refuse_egress(self, server: McpServer) -> None:
        if server.transport == "streamable_http":
            await refuse_egress(self._egress, server.url, "mcp_server.url")

    async def delete(self, server_id: str) -> None:
        _raise_if([] if server_id else [FieldViolation("id", "is required")])
        async with self._store.write() as tx:
            if await tx.get_mcp_server(server_id=server_id, for_update=True) is None:
                raise McpServerNotFound("MCP server not found")
            await tx.delete_mcp_server(server_id)
        self._watch.reset()

    async def resolve_agent_servers(self, agent_id: str) -> tuple[list[McpServer], list[str]]:
        """The agent's servers with their secrets, in its type's order, and the names it refers to
        that no server has (in its project, or globally)."""
        _raise_if([] if agent_id else [FieldViolation("agent_id", "is required")])
        async with self._store.read() as tx:
            agent = await tx.get_agent(agent_id=agent_id)
            if agent is None:
                raise AgentNotFound("agent not found")
            agent_type = await tx.get_agent_type(type_id=agent.agent_type_id)
            if agent_type is None:
                raise AgentTypeNotFound("agent type not found")
            servers: list[McpServer] = []
            missing: list[str] = []
            for server in agent_type.mcp_servers:
                if not server.is_reference:
                    servers.append(server)
                    continue
                found = await tx.get_mcp_server(scoped_name=(agent.project_id, server.name))
                found = found or await tx.get_mcp_server(scoped_name=("", server.name))
                if found is None:
                    missing.append(server.name)
                else:
                    servers.append(found)
        return servers, missing
