"""Resolved agents, remembered between runs so a run does not ask the registry for its agent again.

What ResolveAgent answers depends on who asks (the registry shows a caller only the projects it
may see), so a spec is remembered per caller token, project slug and agent name. It is never
trusted for long: every run's StartAgentRun returns the spec's current revision, and a run whose
remembered spec has another revision resolves it again before it builds anything from it. A
refused start (the agent was paused, terminated or deleted) forgets it.
"""

from __future__ import annotations

from collections import OrderedDict

from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import current_token

SpecKey = tuple[str, str, str]


class AgentSpecs:
    """A bounded LRU of resolved agents in front of the registry's ResolveAgent."""

    def __init__(self, registry: RegistryClient, *, capacity: int) -> None:
        self._registry = registry
        self._capacity = capacity
        self._specs: OrderedDict[SpecKey, resources_pb2.AgentSpec] = OrderedDict()

    @staticmethod
    def key(project_slug: str, agent_name: str) -> SpecKey:
        """The current caller's key for an agent."""
        return (current_token.get() or "", project_slug, agent_name)

    def remembered(self, key: SpecKey) -> resources_pb2.AgentSpec | None:
        spec = self._specs.get(key)
        if spec is not None:
            self._specs.move_to_end(key)
        return spec

    async def resolve(self, key: SpecKey) -> resources_pb2.AgentSpec:
        """Asks the registry (as the current caller) and remembers the answer."""
        _, project_slug, agent_name = key
        spec = await self._registry.resolve_agent(project_slug, agent_name)
        self._specs[key] = spec
        self._specs.move_to_end(key)
        while len(self._specs) > self._capacity:
            self._specs.popitem(last=False)
        return spec

    def forget(self, key: SpecKey) -> None:
        self._specs.pop(key, None)
