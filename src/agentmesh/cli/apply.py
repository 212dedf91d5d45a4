"""`agentmesh apply -f FILE.yaml`: agent types, projects and agents declared in a file, made so in
the registry — what is missing is created, what differs is updated, the rest is left alone.

Three stages, so that a bad file or a conflict changes nothing:

1. **load** (no server needed): the YAML is parsed and every entry validated against the file
   format below (pydantic models that forbid unknown fields); errors name their place in the file,
   e.g. `projects[0].agents[1].config.network_access`.
2. **plan** (reads only): the registry's current state is read and compared with the file. The
   registry's own validation rules run on every object that would be written, references are
   resolved (an agent's type exists and is active, `network_access` and `sub_agents` name agents
   of the project, an existing agent keeps its type), and agent types to write need a superuser.
   Any problem stops here, before the first write, with all problems listed.
3. **execute**: agent types, then projects, then agents. A new agent is created without the
   references (`network_access`, `sub_agents`) to agents that do not exist yet; once every agent
   of the file exists, one update per such agent sets them.

Fields an entry gives are managed; fields it leaves out keep their current value (or their default
when the object is created). In an agent's `config`, `null` clears an override (the type's value
applies again). Updates send a field mask naming exactly the fields that differ. `apply` never
deletes anything. The format is documented in docs/apply.md.

The rules come from the registry's `validation` module and the proto ↔ domain conversions from its
`convert` module: the CLI is a client tool, not a service, and reusing them means the file is
judged by exactly the rules the registry applies.
"""

from __future__ import annotations

import asyncio
import enum
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
import yaml
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentmesh.cli.client import (
    CliError,
    Credentials,
    EmailOption,
    Metadata,
    PasswordOption,
    RegistryOption,
    TokenOption,
    address_of,
    connect,
    describe,
    fail,
)
from agentmesh.registry import convert
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.models import AgentConfig, AgentTypeFields, McpServer, ProjectFields
from agentmesh.registry.v1 import resources_pb2
from agentmesh.registry.validation import (
    DEFAULT_MAX_STEPS,
    DNS_LABEL_RULE,
    check_agent_config,
    check_agent_name,
    check_agent_type,
    check_project,
    is_dns_label,
    slugify,
)
from agentmesh.runtime.errors import DomainError, FieldViolation, NotFound
from agentmesh.runtime.protos import struct

FORMAT_VERSION = 1
_REFERENCE_FIELDS = ("network_access", "sub_agents")
_LIST_PAGE_SIZE = 100

# --- The file format -------------------------------------------------------------------------------


class _Entry(BaseModel):
    # Strict: YAML has real types, so `max_steps: "5"` or `name: 123` are mistakes worth reporting.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class McpServerEntry(_Entry):
    """An MCP server an agent type takes tools from."""

    name: str
    transport: Literal["stdio", "streamable_http"]
    command: str = ""
    args: list[str] = []
    url: str = ""
    env: dict[str, str] = {}


class AgentTypeEntry(_Entry):
    """An agent type; found by `slug` (made from `name` when left out)."""

    name: str
    slug: str = ""
    description: str = ""
    expertise: list[str] = []
    personality_prompt: str = ""
    primary_model: str = ""
    fallback_models: list[str] = []
    model_params: dict[str, JsonValue] = {}
    tools: list[str] = []
    mcp_servers: list[McpServerEntry] = []
    kind: Literal["llm", "loop", "sequential", "parallel"] = "llm"
    sub_agents: list[str] = []
    max_steps: int = 0
    max_iterations: int = 0
    is_active: bool = True


class AgentConfigEntry(_Entry):
    """An agent's overrides of its type; `null` clears one."""

    instructions: str | None = None
    primary_model: str | None = None
    model_params: dict[str, JsonValue] | None = None
    max_steps: int | None = None
    max_iterations: int | None = None
    tools: list[str] | None = None
    sub_agents: list[str] | None = None
    network_access: list[str] | None = None
    mock_responses: list[JsonValue] | None = None


class AgentEntry(_Entry):
    """An agent of a project, spawned from the agent type with slug `type`; found by `name`."""

    name: str
    type: str
    config: AgentConfigEntry = AgentConfigEntry()


class ProjectEntry(_Entry):
    """A project and its agents; found by `slug` (made from `name` when left out)."""

    name: str
    slug: str = ""
    description: str = ""
    agents: list[AgentEntry] = []


class ApplyDocument(_Entry):
    """One YAML document of an apply file."""

    version: Literal[1] = FORMAT_VERSION
    agent_types: list[AgentTypeEntry] = []
    projects: list[ProjectEntry] = []


# --- Loaded declarations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredAgentType:
    """An agent type of the file: `fields` holds the declared values (normalized as the registry
    stores them) over the defaults; `declared` names the fields the file gives."""

    path: str
    fields: AgentTypeFields
    declared: tuple[str, ...]

    @property
    def slug(self) -> str:
        return self.fields.slug


@dataclass(frozen=True)
class DeclaredAgent:
    path: str
    name: str
    type_slug: str
    config: AgentConfig
    declared: tuple[str, ...]  # config fields the file gives


@dataclass(frozen=True)
class DeclaredProject:
    path: str
    fields: ProjectFields
    declared: tuple[str, ...]
    agents: tuple[DeclaredAgent, ...]

    @property
    def slug(self) -> str:
        return self.fields.slug


@dataclass(frozen=True)
class Manifest:
    """Everything an apply file declares, validated as far as it can be without a registry."""

    agent_types: tuple[DeclaredAgentType, ...] = ()
    projects: tuple[DeclaredProject, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.agent_types and not self.projects


class ApplyError(Exception):
    """The file cannot be applied; `problems` name their place in the file. `applied` lists what
    was already done when the error came from a write (empty when nothing was written)."""

    def __init__(self, problems: Sequence[FieldViolation], *, applied: Sequence[Change] = ()) -> None:
        self.problems = list(problems)
        self.applied = list(applied)
        super().__init__("; ".join(_problem_line(problem) for problem in self.problems))


def _problem_line(problem: FieldViolation) -> str:
    return f"{problem.field}: {problem.description}" if problem.field else problem.description


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key; construct_mapping reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_manifest(file: str | Path) -> Manifest:
    """Loads an apply file (`-` reads standard input). ApplyError names every problem of its
    content (`str(error)` lists them on one line); OSError when it cannot be read."""
    return load_manifest(_read_text(file))


def _read_text(file: str | Path) -> str:
    if str(file) == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ApplyError([FieldViolation("", f"not UTF-8 text: {error.reason}")]) from None


def load_manifest(text: str) -> Manifest:
    """Parses and validates the YAML text of an apply file: one document or several (`---`), each
    with `agent_types` and/or `projects`. Raises ApplyError naming every problem found."""
    try:
        documents = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as error:
        raise ApplyError([FieldViolation("", _yaml_problem(error))]) from None
    numbered = [(number, raw) for number, raw in enumerate(documents, 1) if raw is not None]
    problems: list[FieldViolation] = []
    parsed: list[tuple[str, ApplyDocument]] = []
    for number, raw in numbered:
        prefix = f"document {number}: " if len(numbered) > 1 else ""
        if not isinstance(raw, dict):
            problems.append(
                FieldViolation(
                    prefix.rstrip(": "), "a document must be a mapping with agent_types and/or projects"
                )
            )
            continue
        try:
            parsed.append((prefix, ApplyDocument.model_validate(raw)))
        except ValidationError as error:
            problems += [
                FieldViolation(prefix + _loc_path(detail["loc"]), _pydantic_message(detail))
                for detail in error.errors()
            ]
    if problems:
        raise ApplyError(problems)
    manifest = Manifest(
        agent_types=tuple(
            _declared_type(f"{prefix}agent_types[{index}]", entry)
            for prefix, document in parsed
            for index, entry in enumerate(document.agent_types)
        ),
        projects=tuple(
            _declared_project(f"{prefix}projects[{index}]", entry)
            for prefix, document in parsed
            for index, entry in enumerate(document.projects)
        ),
    )
    problems = _duplicates(manifest) + _names(manifest)
    if problems:
        raise ApplyError(problems)
    return manifest


def _declared_type(path: str, entry: AgentTypeEntry) -> DeclaredAgentType:
    values = entry.model_dump()
    # Normalized as the registry stores them, so that an unchanged file compares equal.
    values["name"] = entry.name.strip()
    values["slug"] = entry.slug.strip() or slugify(entry.name)
    values["primary_model"] = entry.primary_model.strip()
    values["max_steps"] = entry.max_steps or DEFAULT_MAX_STEPS
    values["mcp_servers"] = [McpServer(**server) for server in values["mcp_servers"]]
    declared = tuple(name for name in AgentTypeFields.model_fields if name in entry.model_fields_set)
    return DeclaredAgentType(path=path, fields=AgentTypeFields(**values), declared=declared)


def _declared_project(path: str, entry: ProjectEntry) -> DeclaredProject:
    fields = ProjectFields(
        name=entry.name.strip(), slug=entry.slug.strip() or slugify(entry.name), description=entry.description
    )
    declared = tuple(name for name in ProjectFields.model_fields if name in entry.model_fields_set)
    agents = tuple(
        _declared_agent(f"{path}.agents[{index}]", agent) for index, agent in enumerate(entry.agents)
    )
    return DeclaredProject(path=path, fields=fields, declared=declared, agents=agents)


def _declared_agent(path: str, entry: AgentEntry) -> DeclaredAgent:
    declared = tuple(name for name in AgentConfig.model_fields if name in entry.config.model_fields_set)
    values = {name: getattr(entry.config, name) for name in declared}
    if values.get("primary_model") is not None:
        values["primary_model"] = values["primary_model"].strip()
    return DeclaredAgent(
        path=path,
        name=entry.name,
        type_slug=entry.type.strip(),
        config=AgentConfig(**values),
        declared=declared,
    )


def _duplicates(manifest: Manifest) -> list[FieldViolation]:
    problems: list[FieldViolation] = []

    def check(what: str, items: Iterable[tuple[str, str, str]]) -> None:
        first: dict[str, str] = {}
        for key, path, key_field in items:
            if key in first:
                problems.append(
                    FieldViolation(
                        f"{path}.{key_field}", f"{what} {key!r} is declared twice (first at {first[key]})"
                    )
                )
            else:
                first[key] = path

    def key_field(explicit: bool) -> str:
        return "slug" if explicit else "name"

    check(
        "agent type",
        ((t.slug, t.path, key_field("slug" in t.declared)) for t in manifest.agent_types),
    )
    check("project", ((p.slug, p.path, key_field("slug" in p.declared)) for p in manifest.projects))
    for project in manifest.projects:
        check("agent", ((a.name, a.path, "name") for a in project.agents))
    return problems


def _names(manifest: Manifest) -> list[FieldViolation]:
    problems: list[FieldViolation] = []
    for entry in (*manifest.agent_types, *manifest.projects):
        if "slug" in entry.declared:
            if not is_dns_label(entry.slug):
                problems.append(FieldViolation(f"{entry.path}.slug", DNS_LABEL_RULE))
        elif not entry.slug:
            problems.append(
                FieldViolation(f"{entry.path}.slug", "is required (none can be made from the name)")
            )
    for project in manifest.projects:
        for agent in project.agents:
            problems += check_agent_name(agent.name, field=f"{agent.path}.name")
            if not agent.type_slug:
                problems.append(FieldViolation(f"{agent.path}.type", "is required (an agent type's slug)"))
    return problems


def _loc_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _pydantic_message(detail: Any) -> str:
    if detail["type"] == "extra_forbidden":
        return "unknown field"
    if detail["type"] == "missing":
        return "is required"
    return str(detail["msg"])


def _yaml_problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"not valid YAML: line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return f"not valid YAML: {error}"


# --- Planning: the registry's state compared with the file -----------------------------------------


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Change:
    """One declared object and what apply does (or, in a dry run, would do) to it; `fields` names
    the fields an update changes."""

    kind: Literal["agent type", "project", "agent"]
    ref: str
    action: Action
    fields: tuple[str, ...] = ()


@dataclass
class _TypeStep:
    change: Change
    path: str
    fields: AgentTypeFields  # the state to write
    id: str = ""


@dataclass
class _ProjectStep:
    change: Change
    path: str
    fields: ProjectFields
    id: str = ""


@dataclass
class _AgentStep:
    change: Change
    path: str
    project_slug: str
    name: str
    type_slug: str
    config: AgentConfig  # the full config to write
    id: str = ""


@dataclass
class Plan:
    """What applying a manifest takes, in order, with the ids of what exists already."""

    agent_types: list[_TypeStep] = field(default_factory=list)
    projects: list[_ProjectStep] = field(default_factory=list)
    agents: list[_AgentStep] = field(default_factory=list)
    type_ids: dict[str, str] = field(default_factory=dict)  # slug → id of existing types
    agent_names: dict[str, set[str]] = field(default_factory=dict)  # project slug → existing agents

    @property
    def changes(self) -> list[Change]:
        return [step.change for step in (*self.agent_types, *self.projects, *self.agents)]


class _Planner:
    """Reads what the manifest names from the registry and works out the steps."""

    def __init__(self, registry: RegistryClient, metadata: Metadata) -> None:
        self._registry = registry
        self._metadata = metadata
        self._types_by_slug: dict[str, resources_pb2.AgentType | None] = {}
        self._type_slugs: dict[str, str] = {}  # id → slug
        self.problems: list[FieldViolation] = []

    async def plan(self, manifest: Manifest) -> Plan:
        plan = Plan()
        for declared in manifest.agent_types:
            plan.agent_types.append(await self._type_step(declared))
        await self._check_superuser(plan.agent_types)
        planned_types = {step.fields.slug: step for step in plan.agent_types}
        for project in manifest.projects:
            step, existing = await self._project_step(project)
            plan.projects.append(step)
            plan.agent_names[project.slug] = set(existing)
            known = set(existing) | {agent.name for agent in project.agents}
            for agent in project.agents:
                agent_step = await self._agent_step(project, agent, existing, known, planned_types)
                if agent_step is not None:
                    plan.agents.append(agent_step)
        plan.type_ids = {slug: m.id for slug, m in self._types_by_slug.items() if m is not None}
        if self.problems:
            raise ApplyError(self.problems)
        return plan

    async def _type_step(self, declared: DeclaredAgentType) -> _TypeStep:
        current = await self._agent_type(declared.slug)
        if current is None:
            fields, action, changed = declared.fields, Action.CREATE, ()
        else:
            now = convert.agent_type_fields(current)
            fields = now.model_copy(
                update={name: getattr(declared.fields, name) for name in declared.declared}
            )
            changed = _differing(declared.declared, fields, now)
            action = Action.UPDATE if changed else Action.UNCHANGED
        if action is not Action.UNCHANGED:
            self.problems += check_agent_type(fields, prefix=declared.path)
        change = Change("agent type", declared.slug, action, changed)
        return _TypeStep(change, declared.path, fields, current.id if current else "")

    async def _check_superuser(self, steps: list[_TypeStep]) -> None:
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

    async def _project_step(
        self, declared: DeclaredProject
    ) -> tuple[_ProjectStep, dict[str, resources_pb2.Agent]]:
        try:
            current = await self._registry.get_project(slug=declared.slug, metadata=self._metadata)
        except NotFound:
            current = None
        if current is None:
            fields, action, changed, existing = declared.fields, Action.CREATE, (), {}
        else:
            now = convert.project_fields(current)
            fields = now.model_copy(
                update={name: getattr(declared.fields, name) for name in declared.declared}
            )
            changed = _differing(declared.declared, fields, now)
            action = Action.UPDATE if changed else Action.UNCHANGED
            existing = {agent.name: agent for agent in await self._agents(current.id)}
        if action is not Action.UNCHANGED:
            self.problems += check_project(fields, prefix=declared.path)
        change = Change("project", declared.slug, action, changed)
        return _ProjectStep(change, declared.path, fields, current.id if current else ""), existing

    async def _agent_step(
        self,
        project: DeclaredProject,
        declared: DeclaredAgent,
        existing: dict[str, resources_pb2.Agent],
        known: set[str],
        planned_types: dict[str, _TypeStep],
    ) -> _AgentStep | None:
        ref = f"{project.slug}/{declared.name}"
        current = existing.get(declared.name)
        type_active = await self._type_active(declared.type_slug, planned_types)
        if type_active is None:
            self.problems.append(
                FieldViolation(
                    f"{declared.path}.type",
                    f"no agent type {declared.type_slug!r} in this file or the registry",
                )
            )
            return None
        if current is None:
            config, action, changed = declared.config, Action.CREATE, ()
            if not type_active:
                self.problems.append(
                    FieldViolation(
                        f"{declared.path}.type",
                        f"agent type {declared.type_slug!r} is inactive; agents cannot be spawned from it",
                    )
                )
        else:
            current_type = await self._type_slug(current.agent_type_id)
            if current_type != declared.type_slug:
                self.problems.append(
                    FieldViolation(
                        f"{declared.path}.type",
                        f"agent {ref!r} was spawned from type {current_type!r}; an agent's type cannot "
                        "change (give the new agent another name)",
                    )
                )
            now = convert.agent_config(current.config)
            config = now.model_copy(
                update={name: getattr(declared.config, name) for name in declared.declared}
            )
            changed = _differing(declared.declared, config, now)
            action = Action.UPDATE if changed else Action.UNCHANGED
            if changed and current.status == resources_pb2.AGENT_STATUS_TERMINATED:
                self.problems.append(
                    FieldViolation(declared.path, f"agent {ref!r} is terminated and cannot be changed")
                )
        if action is not Action.UNCHANGED:
            self.problems += check_agent_config(
                config, agent_name=declared.name, project_agents=known, prefix=f"{declared.path}.config"
            )
        change = Change("agent", ref, action, tuple(f"config.{name}" for name in changed))
        return _AgentStep(
            change,
            declared.path,
            project.slug,
            declared.name,
            declared.type_slug,
            config,
            current.id if current else "",
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

    async def _type_active(self, slug: str, planned: dict[str, _TypeStep]) -> bool | None:
        """Whether the type will be active once its own step ran; None when it does not exist."""
        if slug in planned:
            return planned[slug].fields.is_active
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


def _differing(names: Iterable[str], wanted: BaseModel, current: BaseModel) -> tuple[str, ...]:
    return tuple(name for name in names if getattr(wanted, name) != getattr(current, name))


# --- Execution -------------------------------------------------------------------------------------


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
                        _agent_type_message(step.fields), request_id=_request_id(), metadata=self._metadata
                    )
                    type_ids[created.slug] = created.id
                elif step.change.action is Action.UPDATE:
                    await self._registry.update_agent_type(
                        _agent_type_message(step.fields, type_id=step.id),
                        step.change.fields,
                        metadata=self._metadata,
                    )
        project_ids: dict[str, str] = {}
        for project_step in plan.projects:
            project_ids[project_step.fields.slug] = project_step.id
            async with self._writing(project_step.path, project_step.change):
                message = resources_pb2.Project(
                    id=project_step.id,
                    name=project_step.fields.name,
                    slug=project_step.fields.slug,
                    description=project_step.fields.description,
                )
                if project_step.change.action is Action.CREATE:
                    created_project = await self._registry.create_project(
                        message, request_id=_request_id(), metadata=self._metadata
                    )
                    project_ids[created_project.slug] = created_project.id
                elif project_step.change.action is Action.UPDATE:
                    await self._registry.update_project(
                        message, project_step.change.fields, metadata=self._metadata
                    )
        await self._agents(plan, type_ids, project_ids)

    async def _agents(self, plan: Plan, type_ids: dict[str, str], project_ids: dict[str, str]) -> None:
        known = {slug: set(names) for slug, names in plan.agent_names.items()}
        # A new agent's references to agents that do not exist yet are set once every agent does.
        deferred: list[tuple[_AgentStep, tuple[str, ...]]] = []
        for step in plan.agents:
            if step.change.action is not Action.CREATE:
                continue
            late = tuple(
                name
                for name in _REFERENCE_FIELDS
                if not set(getattr(step.config, name) or ()) <= known[step.project_slug]
            )
            async with self._writing(step.path, step.change):
                created = await self._registry.create_agent(
                    resources_pb2.Agent(
                        project_id=project_ids[step.project_slug],
                        agent_type_id=type_ids[step.type_slug],
                        name=step.name,
                        config=convert.agent_config_message(
                            step.config.model_copy(update=dict.fromkeys(late))
                        ),
                    ),
                    request_id=_request_id(),
                    metadata=self._metadata,
                )
            step.id = created.id
            known[step.project_slug].add(step.name)
            if late:
                deferred.append((step, late))
        for step in plan.agents:
            if step.change.action is Action.UPDATE:
                await self._update_agent(step, project_ids, step.change.fields, report=True)
        for step, late in deferred:
            await self._update_agent(step, project_ids, [f"config.{name}" for name in late], report=False)
        self.applied += [step.change for step in plan.agents if step.change.action is Action.UNCHANGED]

    async def _update_agent(
        self, step: _AgentStep, project_ids: dict[str, str], paths: Sequence[str], *, report: bool
    ) -> None:
        async with self._writing(step.path, step.change if report else None):
            await self._registry.update_agent(
                resources_pb2.Agent(
                    id=step.id,
                    project_id=project_ids[step.project_slug],
                    config=convert.agent_config_message(step.config),
                ),
                paths,
                metadata=self._metadata,
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
    if head in ("agent_type", "project", "agent") and rest:
        return f"{entry_path}.{rest}"
    return f"{entry_path} ({request_field})"


def _request_id() -> str:
    # Makes a create retried by the channel (on UNAVAILABLE) return the first result, not a conflict.
    return uuid.uuid4().hex


def _agent_type_message(fields: AgentTypeFields, *, type_id: str = "") -> resources_pb2.AgentType:
    return resources_pb2.AgentType(
        id=type_id,
        name=fields.name,
        slug=fields.slug,
        description=fields.description,
        expertise=fields.expertise,
        personality_prompt=fields.personality_prompt,
        primary_model=fields.primary_model,
        fallback_models=fields.fallback_models,
        model_params=struct(fields.model_params),
        tools=fields.tools,
        mcp_servers=[convert.mcp_server_message(server) for server in fields.mcp_servers],
        kind=resources_pb2.AgentKind.Value(f"AGENT_KIND_{fields.kind.value.upper()}"),
        sub_agents=fields.sub_agents,
        max_steps=fields.max_steps,
        max_iterations=fields.max_iterations,
        is_active=fields.is_active,
    )


# --- The whole of it -------------------------------------------------------------------------------


async def plan_manifest(manifest: Manifest, registry: RegistryClient, *, metadata: Metadata) -> Plan:
    """Compares the manifest with the registry (reads only); ApplyError lists every problem."""
    return await _Planner(registry, metadata).plan(manifest)


async def apply_manifest(
    manifest: Manifest, registry: RegistryClient, *, metadata: Metadata, dry_run: bool = False
) -> list[Change]:
    """Makes the registry match the manifest; returns one Change per declared object, in order
    (agent types, projects, agents). With `dry_run`, only plans. ApplyError when the manifest
    does not fit the registry (nothing written) or a write failed (`applied` says what was done)."""
    plan = await plan_manifest(manifest, registry, metadata=metadata)
    if dry_run:
        return plan.changes
    await _Executor(registry, metadata).run(plan)
    return plan.changes


# --- The command -----------------------------------------------------------------------------------

_ACTION_STYLE = {Action.CREATE: "green", Action.UPDATE: "yellow", Action.UNCHANGED: "dim"}
_PAST = {Action.CREATE: "created", Action.UPDATE: "updated", Action.UNCHANGED: "unchanged"}
_FUTURE = {Action.CREATE: "would create", Action.UPDATE: "would update", Action.UNCHANGED: "unchanged"}


def render_changes(console: Console, changes: Sequence[Change], *, dry_run: bool = False) -> None:
    """The summary: one line per object, then the totals."""
    words = _FUTURE if dry_run else _PAST
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("kind", style="bold")
    table.add_column("name")
    table.add_column("action", no_wrap=True)
    for change in changes:
        action = words[change.action]
        if change.fields:
            action += f" ({', '.join(change.fields)})"
        table.add_row(change.kind, escape(change.ref), f"[{_ACTION_STYLE[change.action]}]{action}[/]")
    if changes:
        console.print(table)
    counts = {action: sum(change.action is action for change in changes) for action in Action}
    totals = ", ".join(f"{counts[action]} {words[action]}" for action in Action)
    console.print(f"{'dry run, nothing changed: ' if dry_run else ''}{totals}", soft_wrap=True)


def _print_problems(console: Console, title: str, problems: Sequence[FieldViolation]) -> None:
    console.print(f"[bold red]error:[/] {escape(title)}", soft_wrap=True)
    for problem in problems:
        console.print(f"  {escape(_problem_line(problem))}", soft_wrap=True, highlight=False)


def apply_command(
    file: Annotated[
        str, typer.Option("--file", "-f", help="The YAML file to apply; '-' reads standard input.")
    ],
    registry: RegistryOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change, change nothing.")
    ] = False,
) -> None:
    """Create or update the agent types, projects and agents declared in FILE (idempotent).

    Types and projects are found by slug, agents by name; see docs/apply.md for the format.
    """
    out, err = Console(), Console(stderr=True)
    source = "standard input" if file == "-" else file
    try:
        manifest = read_manifest(file)
    except OSError as error:
        raise fail(f"cannot read {source}: {error.strerror or error}") from None
    except ApplyError as error:
        _print_problems(err, f"{source} is not a valid apply file; nothing was applied", error.problems)
        raise typer.Exit(1) from None
    if manifest.is_empty:
        out.print(f"{escape(source)} declares nothing; nothing to apply", soft_wrap=True)
        return
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        changes = asyncio.run(_apply(manifest, address_of(registry), credentials, dry_run=dry_run))
    except CliError as error:
        raise fail(str(error)) from None
    except ApplyError as error:
        if error.applied:
            render_changes(out, error.applied)
            _print_problems(err, "applying stopped; the objects above were applied", error.problems)
        else:
            _print_problems(err, "nothing was applied", error.problems)
        raise typer.Exit(1) from None
    render_changes(out, changes, dry_run=dry_run)


async def _apply(
    manifest: Manifest, address: str, credentials: Credentials, *, dry_run: bool
) -> list[Change]:
    async with connect(address, credentials) as connection:
        try:
            return await apply_manifest(
                manifest, connection.registry, metadata=connection.metadata, dry_run=dry_run
            )
        except DomainError as error:  # a read while planning
            raise CliError(f"{address}: {describe(error)}") from None
