"""Which MCP servers an agent runs with, and with what secrets.

An agent's spec lists its type's servers with env and header values masked (the registry shows
them to no one), and names of registered servers. What the servers really are comes from the
registry's ResolveMcpServers, asked with this executor's system token: the one place secrets leave
the registry. `${env:NAME}` references in their values are then read from this executor's
environment. Every value becomes one of the executor's secrets. A server that cannot be had —
not registered, a variable not set, the registry unreachable — is reported, never raised: the
run goes on without its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agentmesh.executor.providers.secrets import Secrets, UnsetReference, resolve_references, secret_values
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError

logger = logging.getLogger(__name__)

# What the registry shows for a secret value (it never shows the value itself).
MASK = "********"


@dataclass(frozen=True)
class UnavailableServer:
    """An MCP server a run goes without, and why (free of secrets)."""

    name: str
    reason: str


@dataclass(frozen=True)
class ResolvedServers:
    """The servers to connect, values in full, and those the agent goes without."""

    servers: list[resources_pb2.McpServer] = field(default_factory=list)
    unavailable: list[UnavailableServer] = field(default_factory=list)


def _needs_registry(server: resources_pb2.McpServer) -> bool:
    masked = MASK in server.env.values() or MASK in server.headers.values()
    return not server.transport or masked


class McpServerResolver:
    """Turns an agent's spec into the MCP servers it connects (see the module's docstring)."""

    def __init__(
        self,
        registry: RegistryClient | None,
        *,
        system_metadata: Callable[[], Metadata | None],
        environment: Mapping[str, str],
        secrets: Secrets,
    ) -> None:
        self._registry = registry
        self._system_metadata = system_metadata
        self._environment = environment
        self._secrets = secrets

    async def resolve(self, spec: resources_pb2.AgentSpec) -> ResolvedServers:
        if not spec.mcp_servers:
            return ResolvedServers()
        servers, unavailable = list(spec.mcp_servers), []
        if any(_needs_registry(server) for server in servers):
            servers, unavailable = await self._from_registry(spec)
        resolved: list[resources_pb2.McpServer] = []
        for server in servers:
            try:
                env = resolve_references(server.env, self._environment)
                headers = resolve_references(server.headers, self._environment)
            except UnsetReference as error:
                unavailable.append(UnavailableServer(server.name, f"{error} (set it there)"))
                continue
            self._secrets.add(*secret_values(server.env, server.headers, env, headers))
            full = resources_pb2.McpServer()
            full.CopyFrom(server)
            full.env.clear()
            full.env.update(env)
            full.headers.clear()
            full.headers.update(headers)
            resolved.append(full)
        return ResolvedServers(resolved, unavailable)

    async def _from_registry(
        self, spec: resources_pb2.AgentSpec
    ) -> tuple[list[resources_pb2.McpServer], list[UnavailableServer]]:
        """The servers as the registry resolves them; all of those that need it are unavailable
        when it cannot be asked."""
        metadata = self._system_metadata()
        problem = ""
        if metadata is None or self._registry is None:
            problem = (
                "this executor has no system identity to read MCP servers with (set AGENTMESH_JWT_SECRET)"
            )
        else:
            try:
                response = await self._registry.resolve_mcp_servers(spec.agent.id, metadata=metadata)
            except DomainError as error:
                logger.warning("could not resolve the MCP servers of %s: %s", spec.agent.name, error)
                problem = f"the registry could not resolve it ({error.code.name.lower()})"
            else:
                missing = [
                    UnavailableServer(
                        name, "no MCP server of that name is registered, in the project or globally"
                    )
                    for name in response.missing
                ]
                return list(response.servers), missing
        usable = [server for server in spec.mcp_servers if not _needs_registry(server)]
        gone = [UnavailableServer(s.name, problem) for s in spec.mcp_servers if _needs_registry(s)]
        return usable, gone
