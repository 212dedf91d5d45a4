"""The apply file: loading it (its format is `schema`), and what it declares as the registry's v1
messages, normalized as the registry stores them so that an unchanged file compares equal to what
is there."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from agentmesh.cli.apply.schema import (
    MCP_SERVER_FIELDS,
    AgentConfigEntry,
    AgentEntry,
    AgentTypeEntry,
    ApplyDocument,
    ProjectEntry,
    RegisteredMcpServerEntry,
    RemoteAgentEntry,
    ScheduleEntry,
)
from agentmesh.common.v1 import run_pb2, types_pb2
from agentmesh.registry.declarations import (
    agent_slug,
    check_agent_name,
    check_slug,
    normalized_agent_config,
    normalized_agent_type,
    normalized_project,
)
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.protos import list_value, struct

if TYPE_CHECKING:
    from agentmesh.cli.apply.plan import Change


# --- Loaded declarations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredAgentType:
    """An agent type of the file: `message` holds the declared values over the defaults;
    `declared` names the fields the file gives."""

    path: str
    message: resources_pb2.AgentType
    declared: tuple[str, ...]

    @property
    def slug(self) -> str:
        return self.message.slug


@dataclass(frozen=True)
class DeclaredAgent:
    """An agent of a project; `config` holds the overrides the file gives, named by `declared`."""

    path: str
    name: str
    slug: str
    type_slug: str
    config: resources_pb2.AgentConfig
    declared: tuple[str, ...]
    slug_declared: bool = False
    public: bool | None = None  # None: not in the file


@dataclass(frozen=True)
class DeclaredRemoteAgent:
    """A remote A2A agent of a project; `declared` names the fields the file gives."""

    path: str
    message: resources_pb2.RemoteAgent
    declared: tuple[str, ...]


@dataclass(frozen=True)
class DeclaredSchedule:
    """A schedule of a project; `declared` names the fields the file gives."""

    path: str
    message: resources_pb2.Schedule
    declared: tuple[str, ...]


@dataclass(frozen=True)
class DeclaredProject:
    """A project of the file, its remote agents and its agents."""

    path: str
    message: resources_pb2.Project
    declared: tuple[str, ...]
    agents: tuple[DeclaredAgent, ...]
    remote_agents: tuple[DeclaredRemoteAgent, ...] = ()
    schedules: tuple[DeclaredSchedule, ...] = ()

    @property
    def slug(self) -> str:
        return self.message.slug


@dataclass(frozen=True)
class DeclaredMcpServer:
    """A registered MCP server of the file: global, or of the project with slug `project_slug`."""

    path: str
    project_slug: str
    message: resources_pb2.McpServer
    declared: tuple[str, ...]

    @property
    def ref(self) -> str:
        return f"{self.project_slug}/{self.message.name}" if self.project_slug else self.message.name


@dataclass(frozen=True)
class Manifest:
    """Everything an apply file declares, validated as far as it can be without a registry."""

    agent_types: tuple[DeclaredAgentType, ...] = ()
    projects: tuple[DeclaredProject, ...] = ()
    mcp_servers: tuple[DeclaredMcpServer, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.agent_types and not self.projects and not self.mcp_servers


class ApplyError(Exception):
    """The file cannot be applied; `problems` name their place in the file. `applied` lists what
    was already done when the error came from a write (empty when nothing was written)."""

    def __init__(self, problems: Sequence[FieldViolation], *, applied: Sequence[Change] = ()) -> None:
        self.problems = list(problems)
        self.applied = list(applied)
        super().__init__("; ".join(problem_line(problem) for problem in self.problems))


def problem_line(problem: FieldViolation) -> str:
    """A problem as the terminal shows it: `path: what is wrong`."""
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
                    prefix.rstrip(": "),
                    "a document must be a mapping with agent_types, projects and/or mcp_servers",
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
        mcp_servers=tuple(
            _declared_mcp_server(f"{prefix}mcp_servers[{index}]", entry)
            for prefix, document in parsed
            for index, entry in enumerate(document.mcp_servers)
        ),
    )
    problems = _duplicates(manifest) + _names(manifest)
    if problems:
        raise ApplyError(problems)
    return manifest


def _declared_type(path: str, entry: AgentTypeEntry) -> DeclaredAgentType:
    message = resources_pb2.AgentType(
        name=entry.name,
        slug=entry.slug,
        description=entry.description,
        expertise=entry.expertise,
        personality_prompt=entry.personality_prompt,
        primary_model=entry.primary_model,
        fallback_models=entry.fallback_models,
        model_params=struct(entry.model_params),
        tools=entry.tools,
        mcp_servers=[
            resources_pb2.McpServer(name=server)
            if isinstance(server, str)
            else resources_pb2.McpServer(**server.model_dump())
            for server in entry.mcp_servers
        ],
        kind=resources_pb2.AgentKind.Value(f"AGENT_KIND_{entry.kind.upper()}"),
        sub_agents=entry.sub_agents,
        max_steps=entry.max_steps,
        max_iterations=entry.max_iterations,
        is_active=entry.is_active,
        tool_permissions=permissions(entry.tool_permissions),
        input_expiry_seconds=entry.input_expiry_seconds,
        delegation_limits=resources_pb2.DelegationLimits(**entry.delegation_limits.model_dump()),
        context_budget_tokens=entry.context_budget_tokens,
        compaction_model=entry.compaction_model,
        compaction_prompt=entry.compaction_prompt,
        run_budget=run_pb2.Budget(**entry.run_budget.model_dump()),
    )
    declared = tuple(name for name in AgentTypeEntry.model_fields if name in entry.model_fields_set)
    return DeclaredAgentType(path=path, message=normalized_agent_type(message), declared=declared)


def _declared_mcp_server(path: str, entry: RegisteredMcpServerEntry) -> DeclaredMcpServer:
    message = resources_pb2.McpServer(**entry.model_dump(exclude={"project"}))
    message.name = message.name.strip()
    declared = tuple(name for name in MCP_SERVER_FIELDS if name in entry.model_fields_set)
    return DeclaredMcpServer(
        path=path, project_slug=entry.project.strip(), message=message, declared=declared
    )


def _declared_project(path: str, entry: ProjectEntry) -> DeclaredProject:
    message = resources_pb2.Project(
        name=entry.name,
        slug=entry.slug,
        description=entry.description,
        tool_permissions=permissions(entry.tool_permissions),
        limits=resources_pb2.ProjectLimits(**entry.limits.model_dump(exclude_none=True)),
    )
    declared = tuple(
        name
        for name in ("name", "slug", "description", "tool_permissions", "limits")
        if name in entry.model_fields_set
    )
    agents = tuple(
        _declared_agent(f"{path}.agents[{index}]", agent) for index, agent in enumerate(entry.agents)
    )
    remotes = tuple(
        DeclaredRemoteAgent(
            path=f"{path}.remote_agents[{index}]",
            message=resources_pb2.RemoteAgent(**remote.model_dump()),
            declared=tuple(name for name in RemoteAgentEntry.model_fields if name in remote.model_fields_set),
        )
        for index, remote in enumerate(entry.remote_agents)
    )
    schedules = tuple(
        DeclaredSchedule(
            path=f"{path}.schedules[{index}]",
            message=resources_pb2.Schedule(**schedule.model_dump()),
            declared=tuple(name for name in ScheduleEntry.model_fields if name in schedule.model_fields_set),
        )
        for index, schedule in enumerate(entry.schedules)
    )
    return DeclaredProject(
        path=path,
        message=normalized_project(message),
        declared=declared,
        agents=agents,
        remote_agents=remotes,
        schedules=schedules,
    )


def _declared_agent(path: str, entry: AgentEntry) -> DeclaredAgent:
    declared = tuple(name for name in AgentConfigEntry.model_fields if name in entry.config.model_fields_set)
    config = resources_pb2.AgentConfig()
    for name in declared:
        value = getattr(entry.config, name)
        if value is None:  # `null`: no override
            continue
        if name == "model_params":
            config.model_params.CopyFrom(struct(value))
        elif name == "mock_responses":
            config.mock_responses.CopyFrom(list_value(value))
        elif name in ("tools", "sub_agents", "network_access"):
            getattr(config, name).SetInParent()  # present even when empty: `tools: []` clears
            getattr(config, name).values.extend(value)
        elif name == "tool_permissions":
            config.tool_permissions.update(permissions(value))
        else:
            setattr(config, name, value)
    return DeclaredAgent(
        path=path,
        name=entry.name.strip(),
        slug=agent_slug(entry.name, entry.slug),
        slug_declared="slug" in entry.model_fields_set,
        type_slug=entry.type.strip(),
        config=normalized_agent_config(config),
        declared=declared,
        public=entry.public,
    )


def permissions(rules: dict[str, str]) -> dict[str, int]:
    """A rule map as the registry's messages write it."""
    return {
        pattern: types_pb2.ToolPermission.Value(f"TOOL_PERMISSION_{value.upper()}")
        for pattern, value in rules.items()
    }


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
    check("MCP server", ((s.ref, s.path, "name") for s in manifest.mcp_servers))
    for project in manifest.projects:
        check("agent", ((a.name, a.path, "name") for a in project.agents))
        check("agent slug", ((a.slug, a.path, key_field(a.slug_declared)) for a in project.agents))
        # A remote agent's name is unique among the project's agents and remote agents.
        check("remote agent", ((r.message.name, r.path, "name") for r in project.remote_agents))
        check("schedule", ((s.message.name, s.path, "name") for s in project.schedules))
        agent_refs = {ref for a in project.agents for ref in (a.name, a.slug)}
        problems += [
            FieldViolation(f"{r.path}.name", f"an agent of this project is named {r.message.name!r}")
            for r in project.remote_agents
            if r.message.name in agent_refs
        ]
    return problems


def _names(manifest: Manifest) -> list[FieldViolation]:
    problems: list[FieldViolation] = []
    for entry in (*manifest.agent_types, *manifest.projects):
        problems += check_slug(entry.slug, field=f"{entry.path}.slug")
    for server in manifest.mcp_servers:
        problems += check_slug(server.message.name, field=f"{server.path}.name")
    for project in manifest.projects:
        for remote in project.remote_agents:
            problems += check_slug(remote.message.name, field=f"{remote.path}.name")
        for agent in project.agents:
            problems += check_agent_name(agent.name, field=f"{agent.path}.name")
            problems += check_slug(agent.slug, field=f"{agent.path}.slug")
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
