"""Planning: the registry's current state compared with the file (reads only). Every problem is
collected before the first write, so a file that does not fit the registry changes nothing."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from google.protobuf.message import Message

from agentmesh.cli.apply.document import (
    ApplyError,
    DeclaredAgent,
    DeclaredAgentType,
    DeclaredMcpServer,
    DeclaredProject,
    Manifest,
)
from agentmesh.cli.client import Metadata
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.declarations import (
    check_agent_config,
    check_agent_type,
    check_mcp_server,
    check_project,
    masked_mcp_server,
)
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FieldViolation, NotFound

if TYPE_CHECKING:
    from agentmesh.cli.apply.remote_agents import RemoteAgentStep
    from agentmesh.cli.apply.schedules import ScheduleStep

_LIST_PAGE_SIZE = 100
_RECREATE_HINT = "`agentmesh apply --recreate-terminated` creates it again, with the same name and config"

M = TypeVar("M", bound=Message)


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Change:
    """One declared object and what apply does (or, in a dry run, would do) to it; `fields` names
    the fields an update changes, `warnings` what the registry said about the object written
    (a model or tool no running executor can serve), `version` an agent's new version."""

    kind: Literal["agent type", "project", "remote agent", "MCP server", "agent", "schedule"]
    ref: str
    action: Action
    fields: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list, compare=False)
    # An agent's new latest version after the apply (0: none), and the fields that differ from
    # the one it had before (versions.py).
    version: int = field(default=0, compare=False)
    version_fields: tuple[str, ...] = field(default=(), compare=False)
    # An agent created in place of a terminated one of its name (`--recreate-terminated`).
    recreates: bool = False


@dataclass
class TypeStep:
    """An agent type to write: `message` is the whole state to write (with its id when it exists)."""

    change: Change
    path: str
    message: resources_pb2.AgentType


@dataclass
class ProjectStep:
    """A project to write: `message` is the whole state to write (with its id when it exists)."""

    change: Change
    path: str
    message: resources_pb2.Project


@dataclass
class McpServerStep:
    """A registered MCP server to write: `message` is the whole state to write (with its id when
    it exists); a project's server is created in the project with slug `project_slug`."""

    change: Change
    path: str
    project_slug: str
    message: resources_pb2.McpServer


@dataclass
class AgentStep:
    """An agent to write; `config` is the full config, `id` is set once it exists."""

    change: Change
    path: str
    project_slug: str
    name: str
    slug: str
    type_slug: str
    config: resources_pb2.AgentConfig
    id: str = ""
    public: bool = False


@dataclass
class Plan:
    """What applying a manifest takes, in order, with the ids of what exists already."""

    agent_types: list[TypeStep] = field(default_factory=list)
    projects: list[ProjectStep] = field(default_factory=list)
    remote_agents: list[RemoteAgentStep] = field(default_factory=list)
    mcp_servers: list[McpServerStep] = field(default_factory=list)
    agents: list[AgentStep] = field(default_factory=list)
    schedules: list[ScheduleStep] = field(default_factory=list)
    type_ids: dict[str, str] = field(default_factory=dict)  # slug → id of existing types
    # Project slug → the slugs and names of its existing agents.
    agent_names: dict[str, set[str]] = field(default_factory=dict)

    @property
    def changes(self) -> list[Change]:
        steps = (
            *self.agent_types,
            *self.projects,
            *self.remote_agents,
            *self.mcp_servers,
            *self.agents,
            *self.schedules,
        )
        return [step.change for step in steps]


async def plan_manifest(
    manifest: Manifest, registry: RegistryClient, *, metadata: Metadata, recreate_terminated: bool = False
) -> Plan:
    """Compares the manifest with the registry (reads only); ApplyError lists every problem. A
    declared agent that is terminated is re-created with `recreate_terminated`, else left as it
    is with a warning that says so."""
    return await _Planner(registry, metadata, recreate_terminated).plan(manifest)


class _Planner:
    """Reads what the manifest names from the registry and works out the steps."""

    def __init__(self, registry: RegistryClient, metadata: Metadata, recreate_terminated: bool) -> None:
        self._registry = registry
        self._metadata = metadata
        self._recreate_terminated = recreate_terminated
        self._types_by_slug: dict[str, resources_pb2.AgentType | None] = {}
        self._type_slugs: dict[str, str] = {}  # id → slug
        self.problems: list[FieldViolation] = []

    async def plan(self, manifest: Manifest) -> Plan:
        from agentmesh.cli.apply.remote_agents import plan_remote_agents  # it builds on this module
        from agentmesh.cli.apply.schedules import plan_schedules

        plan = Plan()
        for declared in manifest.agent_types:
            plan.agent_types.append(await self._type_step(declared))
        await self._check_superuser(plan.agent_types)
        planned_types = {step.message.slug: step for step in plan.agent_types}
        for project in manifest.projects:
            step, existing = await self._project_step(project)
            plan.projects.append(step)
            remote_steps, remote_names = await plan_remote_agents(
                self._registry, project, step.message.id, self.problems, metadata=self._metadata
            )
            plan.remote_agents += remote_steps
            # Remote agents are written before agents: network_access may name them at once.
            plan.agent_names[project.slug] = set(existing) | remote_names
            known = plan.agent_names[project.slug] | {
                ref for agent in project.agents for ref in (agent.name, agent.slug)
            }
            for agent in project.agents:
                agent_step = await self._agent_step(project, agent, existing, known, planned_types)
                if agent_step is not None:
                    plan.agents.append(agent_step)
            # Schedules are written after the agents they name.
            plan.schedules += await plan_schedules(
                self._registry, project, step.message.id, known, self.problems, metadata=self._metadata
            )
        await self._mcp_server_steps(manifest, plan)
        plan.type_ids = {slug: m.id for slug, m in self._types_by_slug.items() if m is not None}
        if self.problems:
            raise ApplyError(self.problems)
        return plan

    async def _type_step(self, declared: DeclaredAgentType) -> TypeStep:
        current = await self._agent_type(declared.slug)
        if current is None:
            wanted, action, changed = declared.message, Action.CREATE, ()
        else:
            wanted = overlay(current, declared.message, declared.declared)
            # Inline servers' env and header values are write-only: compared as the registry shows them.
            shown = resources_pb2.AgentType()
            shown.CopyFrom(wanted)
            shown.ClearField("mcp_servers")
            shown.mcp_servers.extend(masked_mcp_server(server) for server in wanted.mcp_servers)
            changed = differing(declared.declared, shown, current)
            action = Action.UPDATE if changed else Action.UNCHANGED
        if action is not Action.UNCHANGED:
            self.problems += check_agent_type(wanted, field=declared.path)
        return TypeStep(Change("agent type", declared.slug, action, changed), declared.path, wanted)

    async def _check_superuser(self, steps: list[TypeStep]) -> None:
        writes = [step for step in steps if step.change.action is not Action.UNCHANGED]
        if not writes:
            return
        user = await self._registry.get_current_user(metadata=self._metadata)
        if not user.is_superuser:
            self.problems.append(
                FieldViolation(
                    writes[0].path,
                    f"agent types are managed by superusers; signed in as {user.email}, who is not one",
                )
            )

    async def _mcp_server_steps(self, manifest: Manifest, plan: Plan) -> None:
        """Registered MCP servers: superusers only (even reading them), compared field by field;
        env and header values are write-only, so only their keys can be compared."""
        if not manifest.mcp_servers:
            return
        user = await self._registry.get_current_user(metadata=self._metadata)
        if not user.is_superuser:
            self.problems.append(
                FieldViolation(
                    manifest.mcp_servers[0].path,
                    f"MCP servers are managed by superusers; signed in as {user.email}, who is not one",
                )
            )
            return
        planned_projects = {step.message.slug: step.message.id for step in plan.projects}
        for declared in manifest.mcp_servers:
            project_id = ""
            if declared.project_slug:
                if declared.project_slug in planned_projects:
                    project_id = planned_projects[declared.project_slug]
                else:
                    try:
                        found = await self._registry.get_project(
                            slug=declared.project_slug, metadata=self._metadata
                        )
                    except NotFound:
                        self.problems.append(
                            FieldViolation(
                                f"{declared.path}.project",
                                f"no project {declared.project_slug!r} in this file or the registry",
                            )
                        )
                        continue
                    project_id = found.id
            plan.mcp_servers.append(await self._mcp_server_step(declared, project_id))

    async def _mcp_server_step(self, declared: DeclaredMcpServer, project_id: str) -> McpServerStep:
        current = None
        if project_id or not declared.project_slug:  # a project still to be created has none
            try:
                current = await self._registry.get_mcp_server(
                    name=declared.message.name, project_id=project_id, metadata=self._metadata
                )
            except NotFound:
                current = None
        if current is None:
            wanted, action, changed = declared.message, Action.CREATE, ()
        else:
            wanted = overlay(current, declared.message, declared.declared)
            changed = differing(declared.declared, masked_mcp_server(wanted), current)
            action = Action.UPDATE if changed else Action.UNCHANGED
        if action is not Action.UNCHANGED:
            self.problems += check_mcp_server(wanted, field=declared.path)
        change = Change("MCP server", declared.ref, action, changed)
        return McpServerStep(change, declared.path, declared.project_slug, wanted)

    async def _project_step(
        self, declared: DeclaredProject
    ) -> tuple[ProjectStep, dict[str, resources_pb2.Agent]]:
        try:
            current = await self._registry.get_project(slug=declared.slug, metadata=self._metadata)
        except NotFound:
            current = None
        if current is None:
            wanted, action, changed, existing = declared.message, Action.CREATE, (), {}
        else:
            wanted = overlay(current, declared.message, declared.declared)
            changed = differing(declared.declared, wanted, current)
            action = Action.UPDATE if changed else Action.UNCHANGED
            # Found by name or slug, as the registry finds them.
            agents = await self._agents(current.id)
            existing = {ref: agent for agent in agents for ref in (agent.slug, agent.name)}
        if action is not Action.UNCHANGED:
            self.problems += check_project(wanted, field=declared.path)
        change = Change("project", declared.slug, action, changed)
        return ProjectStep(change, declared.path, wanted), existing

    async def _agent_step(
        self,
        project: DeclaredProject,
        declared: DeclaredAgent,
        existing: dict[str, resources_pb2.Agent],
        known: set[str],
        planned_types: dict[str, TypeStep],
    ) -> AgentStep | None:
        ref = f"{project.slug}/{declared.slug}"
        current = existing.get(declared.name) or existing.get(declared.slug)
        type_active = await self._type_active(declared.type_slug, planned_types)
        if type_active is None:
            self.problems.append(
                FieldViolation(
                    f"{declared.path}.type",
                    f"no agent type {declared.type_slug!r} in this file or the registry",
                )
            )
            return None
        public = bool(declared.public) if current is None or declared.public is not None else current.public
        terminated = current is not None and current.status == resources_pb2.AGENT_STATUS_TERMINATED
        # Created again in place of the terminated one: its config with the file's over it.
        recreates = terminated and self._recreate_terminated
        publishes = current is not None and not recreates and public != current.public
        if current is None or recreates:
            config, action, changed = declared.config, Action.CREATE, ()
            if current is not None:
                config = overlay(current.config, declared.config, declared.declared)
            if not type_active:
                self.problems.append(
                    FieldViolation(
                        f"{declared.path}.type",
                        f"agent type {declared.type_slug!r} is inactive; agents cannot be spawned from it",
                    )
                )
        else:
            if (current.name, current.slug) != (declared.name, declared.slug):
                self.problems.append(
                    FieldViolation(
                        declared.path,
                        f"agent {ref!r} exists as {current.name!r} (slug {current.slug!r}); an agent's "
                        "name and slug cannot change",
                    )
                )
            current_type = await self._type_slug(current.agent_type_id)
            if current_type != declared.type_slug:
                self.problems.append(
                    FieldViolation(
                        f"{declared.path}.type",
                        f"agent {ref!r} was spawned from type {current_type!r}; an agent's type cannot "
                        "change (give the new agent another name)",
                    )
                )
            config = overlay(current.config, declared.config, declared.declared)
            changed = differing(declared.declared, config, current.config)
            action = Action.UPDATE if changed or publishes else Action.UNCHANGED
            if action is Action.UPDATE and terminated:
                self.problems.append(
                    FieldViolation(
                        declared.path,
                        f"agent {ref!r} is terminated and cannot be changed; {_RECREATE_HINT}",
                    )
                )
        if changed or action is Action.CREATE:
            self.problems += check_agent_config(
                config,
                agent_name=declared.name,
                agent_slug=declared.slug,
                project_agents=known,
                field=f"{declared.path}.config",
            )
        fields = (*(f"config.{name}" for name in changed), *(("public",) if publishes else ()))
        change = Change("agent", ref, action, fields, recreates=recreates)
        if terminated and action is Action.UNCHANGED:
            change.warnings.append(f"it is terminated and takes no runs; {_RECREATE_HINT}")
        return AgentStep(
            change,
            declared.path,
            project.slug,
            declared.name,
            declared.slug,
            declared.type_slug,
            config,
            current.id if current and not recreates else "",
            public,
        )

    async def _agent_type(self, slug: str) -> resources_pb2.AgentType | None:
        if slug not in self._types_by_slug:
            try:
                found = await self._registry.get_agent_type(slug=slug, metadata=self._metadata)
            except NotFound:
                found = None
            self._types_by_slug[slug] = found
            if found is not None:
                self._type_slugs[found.id] = found.slug
        return self._types_by_slug[slug]

    async def _type_slug(self, type_id: str) -> str:
        if type_id not in self._type_slugs:
            found = await self._registry.get_agent_type(agent_type_id=type_id, metadata=self._metadata)
            self._type_slugs[type_id] = found.slug
        return self._type_slugs[type_id]

    async def _type_active(self, slug: str, planned: dict[str, TypeStep]) -> bool | None:
        """Whether the type will be active once its own step ran; None when it does not exist."""
        if slug in planned:
            return planned[slug].message.is_active
        current = await self._agent_type(slug)
        return None if current is None else current.is_active

    async def _agents(self, project_id: str) -> list[resources_pb2.Agent]:
        agents: list[resources_pb2.Agent] = []
        token = ""
        while True:
            page = await self._registry.list_agents(
                project_id, page_size=_LIST_PAGE_SIZE, page_token=token, metadata=self._metadata
            )
            agents += page.agents
            token = page.next_page_token
            if not token:
                return agents


def overlay(current: M, declared: M, names: Iterable[str]) -> M:
    """A copy of `current` with the fields `names` as `declared` has them: set, or cleared when
    `declared` has no value (an agent's `config: {instructions: null}` removes the override)."""
    wanted = type(current)()
    wanted.CopyFrom(current)
    for name in names:
        wanted.ClearField(name)
        descriptor = declared.DESCRIPTOR.fields_by_name[name]
        value = getattr(declared, name)
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            getattr(wanted, name).update(value)
        elif descriptor.is_repeated:
            getattr(wanted, name).extend(value)
        elif descriptor.has_presence and not declared.HasField(name):
            continue
        elif descriptor.message_type is not None:
            getattr(wanted, name).CopyFrom(value)
        else:
            setattr(wanted, name, value)
    return wanted


def differing(names: Iterable[str], wanted: Message, current: Message) -> tuple[str, ...]:
    """The fields of `names` whose value (or presence) differs between the two messages."""
    return tuple(name for name in names if _value(wanted, name) != _value(current, name))


def _value(message: Message, name: str) -> object:
    descriptor = message.DESCRIPTOR.fields_by_name[name]
    if descriptor.has_presence and not message.HasField(name):
        return None
    value = getattr(message, name)
    if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
        return dict(value)
    return value
