"""Pure proto ↔ JSON-model functions for the HTTP face (no I/O)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from google.protobuf import timestamp_pb2

from agentmesh.common.v1 import run_pb2, types_pb2
from agentmesh.gateway.http import schemas, session_schemas
from agentmesh.memory.client import event_to_dict, session_to_dict
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.registry.v1 import registry_service_pb2 as registry_pb2
from agentmesh.registry.v1 import resources_pb2 as registry_resources
from agentmesh.runtime.protos import field_value, set_field, struct, struct_to_dict


def timestamp(value: timestamp_pb2.Timestamp) -> datetime | None:
    if value.seconds == 0 and value.nanos == 0:
        return None
    return value.ToDatetime(tzinfo=UTC)


def enum_name(value: int, enum: Any, prefix: str) -> str:
    """`AGENT_KIND_LLM` → `llm`."""
    return enum.Name(value).removeprefix(prefix).lower()


def enum_value(name: str, enum: Any, prefix: str) -> int:
    return enum.Value(prefix + name.upper())


# Identity.


def user(value: registry_resources.User) -> schemas.UserOut:
    return schemas.UserOut(
        id=value.id,
        email=value.email,
        first_name=value.first_name,
        last_name=value.last_name,
        is_superuser=value.is_superuser,
        is_active=value.is_active,
        created_at=timestamp(value.created_at),
    )


def tokens(value: registry_pb2.Tokens) -> schemas.TokensOut:
    return schemas.TokensOut(
        access_token=value.access_token,
        refresh_token=value.refresh_token,
        token_type="bearer",
        expires_in=value.expires_in,
    )


# Agent types.


def _mcp_server_proto(value: str | dict[str, Any]) -> registry_resources.McpServer:
    """A server given by name (a registered one) or inline."""
    if isinstance(value, str):
        return registry_resources.McpServer(name=value)
    return registry_resources.McpServer(**schemas.McpServerBody(**value).model_dump())


def mcp_server(value: registry_resources.McpServer) -> str | schemas.McpServerOut:
    """An agent type's server: a registered one's name, or the inline definition (masked)."""
    if not value.transport:
        return value.name
    return schemas.McpServerOut(
        name=value.name,
        transport=value.transport,
        command=value.command,
        args=list(value.args),
        url=value.url,
        env=dict(value.env),
        headers=dict(value.headers),
    )


_AGENT_KIND = "AGENT_KIND_"
_TOOL_PERMISSION = "TOOL_PERMISSION_"


def tool_permissions_proto(rules: dict[str, str]) -> dict[str, int]:
    return {
        pattern: enum_value(name, types_pb2.ToolPermission, _TOOL_PERMISSION)
        for pattern, name in rules.items()
    }


def tool_permissions(rules: Any) -> dict[str, Any]:
    return {
        pattern: enum_name(value, types_pb2.ToolPermission, _TOOL_PERMISSION)
        for pattern, value in rules.items()
    }


def agent_type_proto(fields: dict[str, Any], *, id: str = "") -> registry_resources.AgentType:
    """An AgentType holding `fields` (field name → JSON value, as validated by the body model)."""
    proto = registry_resources.AgentType(id=id)
    for name, value in fields.items():
        if name == "model_params":
            proto.model_params.CopyFrom(struct(value))
        elif name == "mcp_servers":
            proto.mcp_servers.extend(_mcp_server_proto(s) for s in value)
        elif name == "kind":
            proto.kind = enum_value(value, registry_resources.AgentKind, _AGENT_KIND)
        elif name == "tool_permissions":
            proto.tool_permissions.update(tool_permissions_proto(value))
        elif name == "delegation_limits":
            proto.delegation_limits.CopyFrom(registry_resources.DelegationLimits(**value))
        elif name == "run_budget":
            proto.run_budget.CopyFrom(run_pb2.Budget(**value))
        elif isinstance(value, list):
            getattr(proto, name).extend(value)
        else:
            setattr(proto, name, value)
    return proto


def agent_type(value: registry_resources.AgentType) -> schemas.AgentTypeOut:
    kind = value.kind or registry_resources.AGENT_KIND_LLM
    return schemas.AgentTypeOut(
        id=value.id,
        name=value.name,
        slug=value.slug,
        description=value.description,
        expertise=list(value.expertise),
        personality_prompt=value.personality_prompt,
        primary_model=value.primary_model,
        fallback_models=list(value.fallback_models),
        model_params=struct_to_dict(value.model_params),
        tools=list(value.tools),
        mcp_servers=[mcp_server(s) for s in value.mcp_servers],
        kind=enum_name(kind, registry_resources.AgentKind, _AGENT_KIND),  # type: ignore[arg-type]
        sub_agents=list(value.sub_agents),
        max_steps=value.max_steps,
        max_iterations=value.max_iterations,
        is_active=value.is_active,
        created_at=timestamp(value.created_at),
        updated_at=timestamp(value.updated_at),
        tool_permissions=tool_permissions(value.tool_permissions),
        input_expiry_seconds=value.input_expiry_seconds,
        delegation_limits=schemas.DelegationLimitsBody(
            max_per_step=value.delegation_limits.max_per_step,
            max_per_chat=value.delegation_limits.max_per_chat,
            allow_reentry=value.delegation_limits.allow_reentry,
        ),
        context_budget_tokens=value.context_budget_tokens,
        compaction_model=value.compaction_model,
        compaction_prompt=value.compaction_prompt,
        run_budget=schemas.RunBudgetBody(
            max_tokens=value.run_budget.max_tokens, max_cost=value.run_budget.max_cost
        ),
    )


# Projects.


def project_proto(fields: dict[str, Any], *, id: str = "") -> registry_resources.Project:
    rules = fields.get("tool_permissions")
    limits = fields.get("limits") or {}
    others = {name: value for name, value in fields.items() if name not in ("tool_permissions", "limits")}
    proto = registry_resources.Project(id=id, **others)
    if rules:
        proto.tool_permissions.update(tool_permissions_proto(rules))
    proto.limits.CopyFrom(
        registry_resources.ProjectLimits(
            **{name: value for name, value in limits.items() if value is not None}
        )
    )
    return proto


def project(value: registry_resources.Project) -> schemas.ProjectOut:
    return schemas.ProjectOut(
        id=value.id,
        name=value.name,
        slug=value.slug,
        description=value.description,
        owner_id=value.owner_id,
        created_at=timestamp(value.created_at),
        updated_at=timestamp(value.updated_at),
        tool_permissions=tool_permissions(value.tool_permissions),
        limits=schemas.ProjectLimits(
            **{
                name: getattr(value.limits, name)
                for name in schemas.ProjectLimits.model_fields
                if value.limits.HasField(name)
            }
        ),
    )


# Agents.

# An agent's overrides, as the registry's AgentConfig message lists them: each field converts as
# its kind says (runtime.protos), so a new override needs no change here — except the one map,
# `tool_permissions`, which has no presence (set when it has rules) and typed values.
_AGENT_CONFIG_FIELDS = tuple(
    field.name for field in registry_resources.AgentConfig.DESCRIPTOR.fields if field.has_presence
)


def agent_config_proto(fields: dict[str, Any]) -> registry_resources.AgentConfig:
    """An AgentConfig with the overrides in `fields` set; None values stay unset."""
    config = registry_resources.AgentConfig()
    for name, value in fields.items():
        if value is None:
            continue
        if name == "tool_permissions":
            config.tool_permissions.update(tool_permissions_proto(value))
        else:
            set_field(config, name, value)
    return config


def agent_config(value: registry_resources.AgentConfig) -> schemas.AgentConfigOut:
    rules = {"tool_permissions": tool_permissions(value.tool_permissions)} if value.tool_permissions else {}
    return schemas.AgentConfigOut(
        **{name: field_value(getattr(value, name)) for name in _AGENT_CONFIG_FIELDS if value.HasField(name)},
        **rules,
    )


_AGENT_STATUS = "AGENT_STATUS_"


def agent_status(value: int) -> str:
    if value == registry_resources.AGENT_STATUS_UNSPECIFIED:
        return "idle"
    return enum_name(value, registry_resources.AgentStatus, _AGENT_STATUS)


def agent(value: registry_resources.Agent) -> schemas.AgentOut:
    return schemas.AgentOut(
        id=value.id,
        name=value.name,
        slug=value.slug,
        project_id=value.project_id,
        agent_type_id=value.agent_type_id,
        status=agent_status(value.status),  # type: ignore[arg-type]
        config=agent_config(value.config),
        public=value.public,
        tasks_completed=value.tasks_completed,
        tokens_used=value.tokens_used,
        cost=value.cost,
        created_at=timestamp(value.created_at),
        last_activity_at=timestamp(value.last_activity_at),
    )


def agent_metrics(value: registry_pb2.GetAgentMetricsResponse) -> schemas.AgentMetricsOut:
    return schemas.AgentMetricsOut(
        total_instances=value.total_instances,
        active_instances=value.active_instances,
        idle_instances=value.idle_instances,
        total_tasks_completed=value.total_tasks_completed,
        total_tokens_used=value.total_tokens_used,
        total_cost_incurred=value.total_cost_incurred,
    )


def pagination(total: int, page: int, page_size: int) -> schemas.Pagination:
    return schemas.Pagination(
        total=total, page=page, page_size=page_size, total_pages=math.ceil(total / page_size) if total else 0
    )


# Sessions and events: the memory service's JSON view, checked against the documented models.


def session(value: memory_pb2.Session) -> session_schemas.SessionOut:
    return session_schemas.SessionOut(**session_to_dict(value))


def event(value: memory_pb2.Event) -> session_schemas.EventOut:
    return session_schemas.EventOut(**event_to_dict(value))
