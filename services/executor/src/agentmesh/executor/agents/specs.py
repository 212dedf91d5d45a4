"""Resolved agents, remembered between runs so a run does not ask the registry for its agent again.

What ResolveAgent answers depends on who asks (the registry shows a caller only the projects it
may see), so a spec is remembered per caller token, project slug and agent name.

The registry pushes agents' changes as they commit (`WatchAgents`, `agents/watch.py`): while that
watch is live (`watched`), a pushed pause, resume or termination updates the remembered specs'
status — a run of a paused or terminated agent is refused here at once — and a pushed spec change
or reset forgets them, so the next run resolves afresh. Nothing pushed is trusted once the watch
drops: every run's StartAgentRun still returns the spec's current revision and refuses a paused
agent's run, and a run whose remembered spec has another revision resolves it again before it
builds anything from it (what happens while the watch is down, and what catches a change the
watch could not see). StartAgentRun's revision is that of the version the run's session uses
(docs/sessions.md, Agent versions): a session pinned to an older version than the remembered
spec resolves its own, which is not remembered. A refused start (the agent was paused,
terminated or deleted) forgets it.
"""

from __future__ import annotations

from collections import OrderedDict

from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import current_token

SpecKey = tuple[str, str, str]


class AgentSpecs:
    """A bounded LRU of resolved agents in front of the registry's ResolveAgent, kept fresh by
    the registry's pushed changes while `watched`."""

    def __init__(self, registry: RegistryClient, *, capacity: int) -> None:
        self._registry = registry
        self._capacity = capacity
        self._specs: OrderedDict[SpecKey, resources_pb2.AgentSpec] = OrderedDict()
        # Bumped by every pushed change: a resolve that a change overtook does not remember its
        # answer (it may be from before the change).
        self._generation = 0
        self.watched = False  # the registry's watch is live and this has taken its reset

    @staticmethod
    def key(project_slug: str, agent_name: str) -> SpecKey:
        """The current caller's key for an agent."""
        return (current_token.get() or "", project_slug, agent_name)

    def remembered(self, key: SpecKey) -> resources_pb2.AgentSpec | None:
        spec = self._specs.get(key)
        if spec is not None:
            self._specs.move_to_end(key)
        return spec

    async def resolve(self, key: SpecKey, *, session_id: str = "") -> resources_pb2.AgentSpec:
        """Asks the registry (as the current caller) and remembers the answer. With a session,
        the answer is the version that session's runs use, which may not be the latest: it is
        not remembered (what is remembered is what a new session runs)."""
        _, project_slug, agent_name = key
        generation = self._generation
        spec = await self._registry.resolve_agent(project_slug, agent_name, session_id=session_id)
        if generation != self._generation or session_id:
            return spec
        self._specs[key] = spec
        self._specs.move_to_end(key)
        while len(self._specs) > self._capacity:
            self._specs.popitem(last=False)
        return spec

    def forget(self, key: SpecKey) -> None:
        self._specs.pop(key, None)

    # -- what the registry pushes (agents/watch.py) --------------------------------------------

    def reset(self) -> None:
        """Forgets everything remembered."""
        self._generation += 1
        self._specs.clear()

    def changed(self, change: registry_internal_service_pb2.AgentChange) -> None:
        """One agent changed: its spec is forgotten, or its new status taken in."""
        self._generation += 1
        keys = [key for key, spec in self._specs.items() if spec.agent.id == change.agent_id]
        for key in keys:
            if change.spec_changed:
                del self._specs[key]
            elif change.status != resources_pb2.AGENT_STATUS_UNSPECIFIED:
                spec = resources_pb2.AgentSpec()
                spec.CopyFrom(self._specs[key])
                spec.agent.status = change.status
                self._specs[key] = spec
