"""The agents their owners published (`Agent.public`), as the gateway reads them for callers who
hold no credential: one by its address, for its public card, and all of them, for the discovery
index. The gateway asks the registry as itself (the system principal), so what it hands out is
decided here: a published agent that is not terminated, or nothing."""

from __future__ import annotations

from collections.abc import Callable

from agentmesh.gateway.errors import NoPublicAgent
from agentmesh.gateway.models import AgentRef
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import InvalidArgument, NotFound

# The index lists at most this many agents (ten of the registry's pages): a document every client
# fetches whole has to stay small. Beyond it, an agent is still found at its own card URL.
MAX_INDEXED_AGENTS = 1000
_PAGE_SIZE = 100


class PublishedAgents:
    """The published agents, read from the registry as the system principal."""

    def __init__(self, registry: RegistryClient, system_metadata: Callable[[], Metadata | None]) -> None:
        self._registry = registry
        self._system_metadata = system_metadata

    async def agent(self, ref: AgentRef) -> resources_pb2.AgentSpec:
        """The published agent at `ref`; NoPublicAgent for one that does not exist, is private
        or is terminated, alike."""
        spec = await self.find(ref)
        if spec is None or not is_published(spec):
            raise NoPublicAgent()
        return spec

    async def find(self, ref: AgentRef) -> resources_pb2.AgentSpec | None:
        """The agent at `ref`, published or not; None when there is none."""
        try:
            return await self._registry.resolve_agent(
                ref.project_slug, ref.agent_name, metadata=self._system_metadata()
            )
        except (NotFound, InvalidArgument):
            return None

    async def all(self) -> list[resources_pb2.AgentSpec]:
        """Every published agent (at most MAX_INDEXED_AGENTS), oldest first."""
        specs: list[resources_pb2.AgentSpec] = []
        token = ""
        while len(specs) < MAX_INDEXED_AGENTS:
            page, token = await self._registry.list_public_agents(
                page_size=_PAGE_SIZE, page_token=token, metadata=self._system_metadata()
            )
            specs += page
            if not token:
                break
        return specs[:MAX_INDEXED_AGENTS]


def is_published(spec: resources_pb2.AgentSpec) -> bool:
    return spec.agent.public and spec.agent.status != resources_pb2.AGENT_STATUS_TERMINATED
