"""Checking declarations before writing them, with the registry's own rules.

A tool that writes several objects (`agentmesh apply`) checks them all before its first write, so
a bad file changes nothing. These functions take v1 messages and name violations by the caller's
`field` paths; the registry still checks every write itself and stays the authority (a refused
write raises ValidationFailed with the same violations). Like `client`, this module is what other
services may import of the registry (an import-linter contract).

`AgentConfig` is the shape of an agent's config overrides as the registry declares them, field
for field: the gateway builds its REST bodies from this one definition.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentmesh.registry import convert, validation
from agentmesh.registry.mcp_servers import registry as mcp_servers
from agentmesh.registry.models import AgentConfig as AgentConfig
from agentmesh.registry.remote_agents import registry as remote_agents
from agentmesh.registry.schedules import registry as schedules
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import FieldViolation


def slug_from_name(name: str) -> str:
    """The slug the registry makes from a display name when a create gives none ('' if none can be)."""
    return validation.slugify(name.strip())


def normalized_agent_type(agent_type: resources_pb2.AgentType) -> resources_pb2.AgentType:
    """The agent type as CreateAgentType stores it: names trimmed, the slug made from the name
    when none is given, max_steps 0 meaning the default bound."""
    normalized = resources_pb2.AgentType()
    normalized.CopyFrom(agent_type)
    normalized.name = agent_type.name.strip()
    normalized.slug = agent_type.slug.strip() or slug_from_name(agent_type.name)
    normalized.primary_model = agent_type.primary_model.strip()
    normalized.max_steps = agent_type.max_steps or validation.DEFAULT_MAX_STEPS
    return normalized


def normalized_project(project: resources_pb2.Project) -> resources_pb2.Project:
    """The project as CreateProject stores it: its name trimmed, the slug made from it when none is given."""
    normalized = resources_pb2.Project()
    normalized.CopyFrom(project)
    normalized.name = project.name.strip()
    normalized.slug = project.slug.strip() or slug_from_name(project.name)
    return normalized


def normalized_agent_config(config: resources_pb2.AgentConfig) -> resources_pb2.AgentConfig:
    """The config overrides as the registry stores them."""
    return convert.agent_config_message(convert.agent_config(config))


def check_slug(slug: str, *, field: str) -> list[FieldViolation]:
    """A slug as the registry requires it (a DNS label)."""
    if not slug:
        return [FieldViolation(field, "is required (none can be made from the name)")]
    return [] if validation.is_dns_label(slug) else [FieldViolation(field, validation.DNS_LABEL_RULE)]


def check_agent_name(name: str, *, field: str = "agent.name") -> list[FieldViolation]:
    return validation.check_agent_name(name, field=field)


def check_agent_type(
    agent_type: resources_pb2.AgentType, *, field: str = "agent_type"
) -> list[FieldViolation]:
    return validation.check_agent_type(convert.agent_type_fields(agent_type), prefix=field)


def check_project(project: resources_pb2.Project, *, field: str = "project") -> list[FieldViolation]:
    return validation.check_project(convert.project_fields(project), prefix=field)


def check_agent_config(
    config: resources_pb2.AgentConfig,
    *,
    agent_name: str,
    agent_slug: str = "",
    project_agents: Iterable[str],
    field: str = "agent.config",
) -> list[FieldViolation]:
    """The overrides' own shape, and that `network_access` and `sub_agents` name other agents of
    the project, by slug or name (`project_agents`: every slug and name it has, or will have)."""
    return validation.check_agent_config(
        convert.agent_config(config),
        agent_name=agent_name,
        agent_slug=agent_slug,
        project_agents=project_agents,
        prefix=field,
    )


def masked_mcp_server(server: resources_pb2.McpServer) -> resources_pb2.McpServer:
    """The server as the registry shows it: env and header values masked (so a declared server
    compares equal to what a read returns when only the values are unknown)."""
    shown = resources_pb2.McpServer()
    shown.CopyFrom(server)
    for values in (shown.env, shown.headers):
        for key in list(values):  # not while iterating the map itself
            values[key] = mcp_servers.MASK
    return shown


def check_mcp_server(server: resources_pb2.McpServer, *, field: str = "mcp_server") -> list[FieldViolation]:
    """A server to register, as CreateMcpServer checks it."""
    return mcp_servers.check_registered(convert.mcp_server(server), field)


def masked_remote_agent(remote: resources_pb2.RemoteAgent) -> resources_pb2.RemoteAgent:
    """The remote agent as the registry shows it: its credential, when set, masked."""
    shown = resources_pb2.RemoteAgent()
    shown.CopyFrom(remote)
    shown.credential = remote_agents.MASK if remote.credential else ""
    return shown


def check_remote_agent(
    remote: resources_pb2.RemoteAgent, *, field: str = "remote_agent"
) -> list[FieldViolation]:
    """A remote agent to write, as Create/UpdateRemoteAgent check it (its project aside)."""
    fields = {name: getattr(remote, name) for name in ("name", "card_url", "credential", "description")}
    return remote_agents.remote_agent_violations(project_id="-", prefix=field, **fields)


def check_schedule(schedule: resources_pb2.Schedule, *, field: str = "schedule") -> list[FieldViolation]:
    """A schedule to write, as Create/UpdateSchedule check it (its agent's existence aside)."""
    return schedules.schedule_violations(
        name=schedule.name,
        agent=schedule.agent,
        message=schedule.message,
        cron=schedule.cron,
        time_zone_name=schedule.time_zone,
        session_policy=schedule.session_policy,
        missed_policy=schedule.missed_policy,
        overlap_policy=schedule.overlap_policy,
        prefix=field,
    )


def agent_slug(name: str, slug: str = "") -> str:
    """The slug an agent of that name gets when created with that slug (made from the name when
    empty), as the registry makes it."""
    return slug.strip() or validation.slugify(name.strip())
