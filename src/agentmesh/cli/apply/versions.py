"""What an apply did to its agents' versions: every change of an agent or of its type makes a new
version of the agent (docs/sessions.md, Agent versions), so an apply that changes a type changes
agents it does not update itself. Each declared agent that existed before is read before and after
the writes; one whose latest version moved gets that number and the fields that changed since
(the registry's diff), for the report."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from agentmesh.cli.apply.plan import Plan
from agentmesh.cli.client import Metadata
from agentmesh.registry.client import RegistryClient


async def latest_versions(
    registry: RegistryClient, plan: Plan, *, metadata: Metadata, of: Collection[str] | None = None
) -> dict[str, int]:
    """The latest version of each declared agent that exists (or of those of them whose ids are
    in `of`), by id (0: none kept yet)."""
    project_ids = {step.message.slug: step.message.id for step in plan.projects}
    latest: dict[str, int] = {}
    for step in plan.agents:
        if step.id and (of is None or step.id in of):
            listed = await registry.list_agent_versions(
                project_ids[step.project_slug], step.id, page_size=1, metadata=metadata
            )
            latest[step.id] = listed.versions[0].number if listed.versions else 0
    return latest


async def note_new_versions(
    registry: RegistryClient, plan: Plan, before: dict[str, int], *, metadata: Metadata
) -> None:
    """Gives the change of each agent in `before` whose latest version is not the one it had its
    `version` and `version_fields`."""
    project_ids = {step.message.slug: step.message.id for step in plan.projects}
    after = await latest_versions(registry, plan, metadata=metadata, of=before)
    for step in plan.agents:
        number, was = after.get(step.id, 0), before.get(step.id)
        if was is None or number <= was:
            continue
        fields: tuple[str, ...] = ()
        if number > 1:  # version 1 has nothing before it to differ from
            diff = await registry.diff_agent_versions(
                project_ids[step.project_slug], step.id, number, against=was, metadata=metadata
            )
            fields = tuple(change.field for change in diff.changes)
        step.change = replace(step.change, version=number, version_fields=fields)
