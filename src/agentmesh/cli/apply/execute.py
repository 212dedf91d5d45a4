"""Execution: a plan's writes, in order — agent types, projects, remote agents, MCP servers, then
agents, with the references between new agents set once they all exist, then schedules (they name
agents). The registry checks every write itself; a refused write stops applying and names the
entry, with what was applied before it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from agentmesh.cli.apply.document import ApplyError, Manifest
from agentmesh.cli.apply.plan import Action, AgentStep, Change, Plan, plan_manifest
from agentmesh.cli.apply.remote_agents import write_remote_agent
from agentmesh.cli.apply.schedules import write_schedule
from agentmesh.cli.apply.versions import latest_versions, note_new_versions
from agentmesh.cli.client import Metadata, describe
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError, FieldViolation

_REFERENCE_FIELDS = ("network_access", "sub_agents")


async def apply_manifest(
    manifest: Manifest,
    registry: RegistryClient,
    *,
    metadata: Metadata,
    dry_run: bool = False,
    recreate_terminated: bool = False,
) -> list[Change]:
    """Makes the registry match the manifest; returns one Change per declared object, in order
    (agent types, projects, agents). With `dry_run`, only plans. ApplyError when the manifest
    does not fit the registry (nothing written) or a write failed (`applied` says what was done).
    The changes of agents that got a new version say so (versions.py)."""
    plan = await plan_manifest(manifest, registry, metadata=metadata, recreate_terminated=recreate_terminated)
    if dry_run or all(change.action is Action.UNCHANGED for change in plan.changes):
        return plan.changes
    before = await latest_versions(registry, plan, metadata=metadata)
    await _Executor(registry, metadata).run(plan)
    await note_new_versions(registry, plan, before, metadata=metadata)
    return plan.changes


class _Executor:
    """Carries out a plan in order, remembering what it did for the report."""

    def __init__(self, registry: RegistryClient, metadata: Metadata) -> None:
        self._registry = registry
        self._metadata = metadata
        self.applied: list[Change] = []

    async def run(self, plan: Plan) -> None:
        type_ids = dict(plan.type_ids)
        for step in plan.agent_types:
            async with self._writing(step.path, step.change):
                if step.change.action is Action.CREATE:
                    created = await self._registry.create_agent_type(
                        step.message,
                        request_id=_request_id(),
                        metadata=self._metadata,
                        warnings=step.change.warnings,
                    )
                    type_ids[created.slug] = created.id
                elif step.change.action is Action.UPDATE:
                    await self._registry.update_agent_type(
                        step.message,
                        step.change.fields,
                        metadata=self._metadata,
                        warnings=step.change.warnings,
                    )
        project_ids: dict[str, str] = {}
        for project_step in plan.projects:
            project_ids[project_step.message.slug] = project_step.message.id
            async with self._writing(project_step.path, project_step.change):
                if project_step.change.action is Action.CREATE:
                    created_project = await self._registry.create_project(
                        project_step.message, request_id=_request_id(), metadata=self._metadata
                    )
                    project_ids[created_project.slug] = created_project.id
                elif project_step.change.action is Action.UPDATE:
                    await self._registry.update_project(
                        project_step.message, project_step.change.fields, metadata=self._metadata
                    )
        for remote_step in plan.remote_agents:
            async with self._writing(remote_step.path, remote_step.change):
                await write_remote_agent(
                    self._registry,
                    remote_step,
                    project_ids[remote_step.project_slug],
                    metadata=self._metadata,
                )
        for server_step in plan.mcp_servers:
            async with self._writing(server_step.path, server_step.change):
                if server_step.change.action is Action.CREATE:
                    server = resources_pb2.McpServer()
                    server.CopyFrom(server_step.message)
                    server.project_id = project_ids.get(server_step.project_slug, "")
                    await self._registry.create_mcp_server(
                        server, request_id=_request_id(), metadata=self._metadata
                    )
                elif server_step.change.action is Action.UPDATE:
                    await self._registry.update_mcp_server(
                        server_step.message, server_step.change.fields, metadata=self._metadata
                    )
        await self._agents(plan, type_ids, project_ids)
        for schedule_step in plan.schedules:
            async with self._writing(schedule_step.path, schedule_step.change):
                await write_schedule(
                    self._registry,
                    schedule_step,
                    project_ids[schedule_step.project_slug],
                    metadata=self._metadata,
                )

    async def _agents(self, plan: Plan, type_ids: dict[str, str], project_ids: dict[str, str]) -> None:
        known = {slug: set(names) for slug, names in plan.agent_names.items()}
        # A new agent's references to agents that do not exist yet are set once every agent does.
        deferred: list[tuple[AgentStep, tuple[str, ...]]] = []
        for step in plan.agents:
            if step.change.action is not Action.CREATE:
                continue
            late = tuple(
                name
                for name in _REFERENCE_FIELDS
                if not set(getattr(step.config, name).values) <= known[step.project_slug]
            )
            config = resources_pb2.AgentConfig()
            config.CopyFrom(step.config)
            for name in late:
                config.ClearField(name)
            async with self._writing(step.path, step.change):
                created = await self._registry.create_agent(
                    resources_pb2.Agent(
                        project_id=project_ids[step.project_slug],
                        agent_type_id=type_ids[step.type_slug],
                        name=step.name,
                        slug=step.slug,
                        config=config,
                        public=step.public,
                    ),
                    request_id=_request_id(),
                    replace_terminated=step.change.recreates,
                    metadata=self._metadata,
                    warnings=step.change.warnings,
                )
            step.id = created.id
            known[step.project_slug].update((step.name, step.slug))
            if late:
                deferred.append((step, late))
        for step in plan.agents:
            if step.change.action is Action.UPDATE:
                await self._update_agent(step, project_ids, step.change.fields, report=True)
        for step, late in deferred:
            await self._update_agent(step, project_ids, [f"config.{name}" for name in late], report=False)
        self.applied += [step.change for step in plan.agents if step.change.action is Action.UNCHANGED]

    async def _update_agent(
        self, step: AgentStep, project_ids: dict[str, str], paths: Sequence[str], *, report: bool
    ) -> None:
        async with self._writing(step.path, step.change if report else None):
            await self._registry.update_agent(
                resources_pb2.Agent(
                    id=step.id,
                    project_id=project_ids[step.project_slug],
                    config=step.config,
                    public=step.public,
                ),
                paths,
                metadata=self._metadata,
                warnings=step.change.warnings,
            )

    @asynccontextmanager
    async def _writing(self, path: str, change: Change | None) -> AsyncIterator[None]:
        """One write: when it succeeds its change joins the report; a DomainError becomes an
        ApplyError naming the entry, with the registry's field paths mapped into the file."""
        try:
            yield
        except DomainError as error:
            problems = [FieldViolation(path, describe(error))]
            problems += [
                FieldViolation(_file_path(path, violation.field), violation.description)
                for violation in error.violations
            ]
            raise ApplyError(problems, applied=self.applied) from None
        if change is not None:
            self.applied.append(change)


def _file_path(entry_path: str, request_field: str) -> str:
    """A registry field path (`agent_type.max_steps`, `agent.config.tools`) as a file path."""
    head, _, rest = request_field.partition(".")
    if head in ("agent_type", "project", "agent", "mcp_server", "remote_agent", "schedule") and rest:
        return f"{entry_path}.{rest}"
    return f"{entry_path} ({request_field})"


def _request_id() -> str:
    # Makes a create retried by the channel (on UNAVAILABLE) return the first result, not a conflict.
    return uuid.uuid4().hex
