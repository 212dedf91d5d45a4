"""Remote A2A agents in an apply file (kind RemoteAgent, a project's `remote_agents`): planned
against the project's registered remote agents, found by name, and written before the project's
agents (whose `network_access` may name them).

The credential is write-only — the registry shows "********" when one is set — so it is compared by
presence: declaring one where none is set (or none where one is) updates it, a different value
alone does not. To rotate it, PATCH the remote agent (`credential`), as for MCP servers' secrets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentmesh.cli.apply.document import DeclaredProject
from agentmesh.cli.apply.plan import Action, Change, differing, overlay
from agentmesh.cli.client import Metadata
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.declarations import check_remote_agent, masked_remote_agent
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import unary
from agentmesh.runtime.errors import FieldViolation

_LIST_PAGE_SIZE = 100


@dataclass
class RemoteAgentStep:
    """A remote agent to write: `message` is the whole state to write (with its id when it
    exists); a new one is created in the project with slug `project_slug`."""

    change: Change
    path: str
    project_slug: str
    message: resources_pb2.RemoteAgent


async def plan_remote_agents(
    registry: RegistryClient,
    project: DeclaredProject,
    project_id: str,
    problems: list[FieldViolation],
    *,
    metadata: Metadata,
) -> tuple[list[RemoteAgentStep], set[str]]:
    """The steps for the project's declared remote agents (problems appended to `problems`), and
    the names of every remote agent the project will have (what `network_access` may name)."""
    current = {r.name: r for r in await _registered(registry, project_id, metadata)} if project_id else {}
    steps = []
    for declared in project.remote_agents:
        existing = current.get(declared.message.name)
        if existing is None:
            wanted, action, changed = declared.message, Action.CREATE, ()
        else:
            wanted = overlay(existing, declared.message, declared.declared)
            changed = differing(declared.declared, masked_remote_agent(wanted), existing)
            action = Action.UPDATE if changed else Action.UNCHANGED
        if action is not Action.UNCHANGED:
            problems += check_remote_agent(wanted, field=declared.path)
        change = Change("remote agent", f"{project.slug}/{declared.message.name}", action, changed)
        steps.append(RemoteAgentStep(change, declared.path, project.slug, wanted))
    return steps, set(current) | {declared.message.name for declared in project.remote_agents}


async def write_remote_agent(
    registry: RegistryClient, step: RemoteAgentStep, project_id: str, *, metadata: Metadata
) -> None:
    """Creates or updates the step's remote agent (nothing for an unchanged one)."""
    if step.change.action is Action.CREATE:
        remote = resources_pb2.RemoteAgent()
        remote.CopyFrom(step.message)
        remote.project_id = project_id
        await unary(
            registry.stub.CreateRemoteAgent,
            pb.CreateRemoteAgentRequest(remote_agent=remote),
            metadata=metadata,
        )
    elif step.change.action is Action.UPDATE:
        request = pb.UpdateRemoteAgentRequest(remote_agent=step.message)
        request.update_mask.paths.extend(step.change.fields)
        await unary(registry.stub.UpdateRemoteAgent, request, metadata=metadata)


async def _registered(
    registry: RegistryClient, project_id: str, metadata: Metadata
) -> Iterable[resources_pb2.RemoteAgent]:
    found: list[resources_pb2.RemoteAgent] = []
    token = ""
    while True:
        page = await unary(
            registry.stub.ListRemoteAgents,
            pb.ListRemoteAgentsRequest(project_id=project_id, page_size=_LIST_PAGE_SIZE, page_token=token),
            metadata=metadata,
        )
        found += page.remote_agents
        token = page.next_page_token
        if not token:
            return found
