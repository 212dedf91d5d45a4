"""Pure conversions between the registry's protobuf messages and its domain models."""

from __future__ import annotations

from collections.abc import Mapping

from agentmesh.common.v1 import types_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb2
from agentmesh.registry.agents.watch import AgentChange
from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.mcp_servers.registry import masked
from agentmesh.registry.models import (
    AGENT_CONFIG_FIELDS,
    LIMIT_NAMES,
    Agent,
    AgentConfig,
    AgentKind,
    AgentMetrics,
    AgentSpec,
    AgentStatus,
    AgentType,
    AgentTypeFields,
    AgentVersion,
    ApiKey,
    DelegationLimits,
    Executor,
    Invitation,
    IssuedTokens,
    McpServer,
    ModelProvider,
    NewAgent,
    Project,
    ProjectFields,
    ProjectLimits,
    RegisteredMcpServer,
    RunBudget,
    ToolPermission,
    ToolPermissions,
    User,
)
from agentmesh.registry.runs.input_convert import input_request_message
from agentmesh.registry.runs.leases import Renewal
from agentmesh.registry.usage.convert import run_budget_message
from agentmesh.registry.v1 import registry_service_pb2 as service_pb2
from agentmesh.registry.v1 import resources_pb2 as pb
from agentmesh.registry.validation import check_tool_permissions
from agentmesh.runtime.errors import DomainError, FieldViolation
from agentmesh.runtime.protos import field_value, list_value, set_field, struct, struct_to_dict, timestamp

_KIND_TO_PROTO = {
    AgentKind.LLM: pb.AGENT_KIND_LLM,
    AgentKind.LOOP: pb.AGENT_KIND_LOOP,
    AgentKind.SEQUENTIAL: pb.AGENT_KIND_SEQUENTIAL,
    AgentKind.PARALLEL: pb.AGENT_KIND_PARALLEL,
}
_KIND_FROM_PROTO = {value: kind for kind, value in _KIND_TO_PROTO.items()} | {
    pb.AGENT_KIND_UNSPECIFIED: AgentKind.LLM
}
_STATUS_TO_PROTO = {
    AgentStatus.IDLE: pb.AGENT_STATUS_IDLE,
    AgentStatus.WORKING: pb.AGENT_STATUS_WORKING,
    AgentStatus.PAUSED: pb.AGENT_STATUS_PAUSED,
    AgentStatus.TERMINATED: pb.AGENT_STATUS_TERMINATED,
    AgentStatus.WAITING: pb.AGENT_STATUS_WAITING,
}

_PERMISSION_TO_PROTO = {
    ToolPermission.ALLOW: types_pb2.TOOL_PERMISSION_ALLOW,
    ToolPermission.ASK: types_pb2.TOOL_PERMISSION_ASK,
    ToolPermission.DENY: types_pb2.TOOL_PERMISSION_DENY,
}
_PERMISSION_FROM_PROTO = {value: permission for permission, value in _PERMISSION_TO_PROTO.items()}


# --- proto → domain ------------------------------------------------------------------------------


def agent_type_fields(message: pb.AgentType) -> AgentTypeFields:
    if message.kind not in _KIND_FROM_PROTO:
        raise ValidationFailed.of([FieldViolation("agent_type.kind", f"unknown kind {message.kind}")])
    return AgentTypeFields(
        name=message.name.strip(),
        slug=message.slug.strip(),
        description=message.description,
        expertise=list(message.expertise),
        personality_prompt=message.personality_prompt,
        primary_model=message.primary_model.strip(),
        fallback_models=list(message.fallback_models),
        model_params=struct_to_dict(message.model_params),
        tools=list(message.tools),
        mcp_servers=[mcp_server(server) for server in message.mcp_servers],
        kind=_KIND_FROM_PROTO[message.kind],
        sub_agents=list(message.sub_agents),
        max_steps=message.max_steps,
        max_iterations=message.max_iterations,
        is_active=message.is_active,
        tool_permissions=tool_permissions(message.tool_permissions, "agent_type.tool_permissions"),
        input_expiry_seconds=message.input_expiry_seconds,
        delegation_limits=DelegationLimits(
            max_per_step=message.delegation_limits.max_per_step,
            max_per_chat=message.delegation_limits.max_per_chat,
            allow_reentry=message.delegation_limits.allow_reentry,
        ),
        context_budget_tokens=message.context_budget_tokens,
        compaction_model=message.compaction_model,
        compaction_prompt=message.compaction_prompt,
        run_budget=RunBudget(max_tokens=message.run_budget.max_tokens, max_cost=message.run_budget.max_cost),
    )


def tool_permissions(rules: Mapping[str, int], field: str) -> ToolPermissions:
    """A rule map as the domain writes it; INVALID_ARGUMENT naming a rule without a permission."""
    unset = [pattern for pattern, value in rules.items() if value not in _PERMISSION_FROM_PROTO]
    if unset:  # refused here (the domain cannot hold them), with the map's other problems
        raise ValidationFailed.of(
            [
                *check_tool_permissions(field, rules),
                *(
                    FieldViolation(field, f"key {pattern!r}: the permission must be one of allow, ask, deny")
                    for pattern in unset
                ),
            ]
        )
    return {pattern: _PERMISSION_FROM_PROTO[value] for pattern, value in rules.items()}


def tool_permissions_message(rules: ToolPermissions) -> dict[str, int]:
    return {pattern: _PERMISSION_TO_PROTO[permission] for pattern, permission in rules.items()}


def mcp_server(message: pb.McpServer) -> McpServer:
    """The server's definition (a registered server's id, project and times are not part of it)."""
    return McpServer(
        name=message.name.strip(),
        transport=message.transport,
        command=message.command,
        args=list(message.args),
        url=message.url,
        env=dict(message.env),
        headers=dict(message.headers),
    )


def project_fields(message: pb.Project) -> ProjectFields:
    return ProjectFields(
        name=message.name.strip(),
        slug=message.slug.strip(),
        description=message.description,
        tool_permissions=tool_permissions(message.tool_permissions, "project.tool_permissions"),
        # The limits the message sets; unset ones stay unset (the operator's default).
        limits=ProjectLimits(
            **{name: getattr(message.limits, name) for name in LIMIT_NAMES if message.limits.HasField(name)}
        ),
    )


def new_agent(message: pb.Agent) -> NewAgent:
    return NewAgent(
        project_id=message.project_id,
        agent_type_id=message.agent_type_id,
        name=message.name,
        slug=message.slug,
        config=agent_config(message.config),
        public=message.public,
    )


def agent_config(message: pb.AgentConfig) -> AgentConfig:
    """The overrides a message sets; each field travels as its proto kind says (a StringList, a
    Struct, a ListValue, or a scalar), so the field list is AgentConfig's own."""
    values = {
        field: field_value(getattr(message, field))
        for field in AGENT_CONFIG_FIELDS
        if field != "tool_permissions" and message.HasField(field)
    }
    if message.tool_permissions:  # a map is set when it has rules
        values["tool_permissions"] = tool_permissions(
            message.tool_permissions, "agent.config.tool_permissions"
        )
    if "primary_model" in values:
        values["primary_model"] = values["primary_model"].strip()
    return AgentConfig(**values)


def user_message(user: User) -> pb.User:
    return pb.User(
        id=user.id,
        email=user.email,
        first_name=user.first_name,
        last_name=user.last_name,
        is_superuser=user.is_superuser,
        is_active=user.is_active,
        created_at=timestamp(user.created_at),
    )


def invitation_message(invitation: Invitation) -> pb.Invitation:
    """An invitation's description; its token and the token's hash never leave the registry."""
    message = pb.Invitation(
        id=invitation.id,
        created_by=invitation.created_by,
        created_at=timestamp(invitation.created_at),
        expires_at=timestamp(invitation.expires_at),
    )
    if invitation.used_at is not None:
        message.used_at.CopyFrom(timestamp(invitation.used_at))
    if invitation.revoked_at is not None:
        message.revoked_at.CopyFrom(timestamp(invitation.revoked_at))
    return message


def api_key_message(key: ApiKey) -> pb.ApiKey:
    """A key's description; the secret and its hash never leave the registry."""
    message = pb.ApiKey(
        id=key.id,
        user_id=key.user_id,
        name=key.name,
        prefix=key.prefix,
        project_id=key.project_id or "",
        created_at=timestamp(key.created_at),
    )
    if key.expires_at is not None:
        message.expires_at.CopyFrom(timestamp(key.expires_at))
    if key.revoked_at is not None:
        message.revoked_at.CopyFrom(timestamp(key.revoked_at))
    return message


def tokens_message(tokens: IssuedTokens) -> service_pb2.Tokens:
    return service_pb2.Tokens(
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        token_type=tokens.token_type,
        expires_in=tokens.expires_in,
    )


def mcp_server_message(server: McpServer, *, secrets: bool = False) -> pb.McpServer:
    """The server as answers show it: env and header values masked unless `secrets` (only
    ResolveMcpServers, for executors, asks for them)."""
    shown = server if secrets else masked(server)
    message = pb.McpServer(
        name=shown.name,
        transport=shown.transport,
        command=shown.command,
        args=shown.args,
        url=shown.url,
        env=shown.env,
        headers=shown.headers,
    )
    if isinstance(shown, RegisteredMcpServer):
        message.id = shown.id
        message.project_id = shown.project_id
        message.created_at.CopyFrom(timestamp(shown.created_at))
        message.updated_at.CopyFrom(timestamp(shown.updated_at))
    return message


def agent_type_message(agent_type: AgentType) -> pb.AgentType:
    return pb.AgentType(
        id=agent_type.id,
        name=agent_type.name,
        slug=agent_type.slug,
        description=agent_type.description,
        expertise=agent_type.expertise,
        personality_prompt=agent_type.personality_prompt,
        primary_model=agent_type.primary_model,
        fallback_models=agent_type.fallback_models,
        model_params=struct(agent_type.model_params),
        tools=agent_type.tools,
        mcp_servers=[mcp_server_message(server) for server in agent_type.mcp_servers],
        kind=_KIND_TO_PROTO[agent_type.kind],
        sub_agents=agent_type.sub_agents,
        max_steps=agent_type.max_steps,
        max_iterations=agent_type.max_iterations,
        is_active=agent_type.is_active,
        created_at=timestamp(agent_type.created_at),
        updated_at=timestamp(agent_type.updated_at),
        tool_permissions=tool_permissions_message(agent_type.tool_permissions),
        input_expiry_seconds=agent_type.input_expiry_seconds,
        delegation_limits=delegation_limits_message(agent_type.delegation_limits),
        context_budget_tokens=agent_type.context_budget_tokens,
        compaction_model=agent_type.compaction_model,
        compaction_prompt=agent_type.compaction_prompt,
        run_budget=run_budget_message(agent_type.run_budget),
    )


def project_message(project: Project, limits_in_force: ProjectLimits | None = None) -> pb.Project:
    """The project as a message; `limits_in_force` (the operator's defaults filled in) when
    known."""
    return pb.Project(
        id=project.id,
        name=project.name,
        slug=project.slug,
        description=project.description,
        owner_id=project.owner_id,
        created_at=timestamp(project.created_at),
        updated_at=timestamp(project.updated_at),
        tool_permissions=tool_permissions_message(project.tool_permissions),
        limits=pb.ProjectLimits(**project.limits.set()),
        limits_in_force=pb.ProjectLimits(**limits_in_force.set()) if limits_in_force else None,
    )


def agent_config_message(config: AgentConfig) -> pb.AgentConfig:
    message = pb.AgentConfig()
    for field in AGENT_CONFIG_FIELDS:
        value = getattr(config, field)
        if value is None:
            continue
        if field == "tool_permissions":
            message.tool_permissions.update(tool_permissions_message(value))
            continue
        set_field(message, field, value)
    return message


def agent_message(agent: Agent) -> pb.Agent:
    return pb.Agent(
        id=agent.id,
        name=agent.name,
        slug=agent.slug,
        project_id=agent.project_id,
        agent_type_id=agent.agent_type_id,
        status=_STATUS_TO_PROTO[agent.status],
        config=agent_config_message(agent.config),
        public=agent.public,
        tasks_completed=agent.tasks_completed,
        tokens_used=agent.tokens_used,
        cost=agent.cost,
        created_at=timestamp(agent.created_at),
        last_activity_at=timestamp(agent.last_activity_at),
    )


def metrics_response(metrics: AgentMetrics) -> service_pb2.GetAgentMetricsResponse:
    return service_pb2.GetAgentMetricsResponse(**metrics.model_dump())


def agent_version_message(version: AgentVersion) -> pb.AgentVersion:
    return pb.AgentVersion(
        agent_id=version.agent_id,
        project_id=version.project_id,
        number=version.number,
        agent_type=agent_type_message(version.agent_type),
        config=agent_config_message(version.config),
        created_at=timestamp(version.created_at),
        created_by=version.created_by,
    )


def agent_spec_message(spec: AgentSpec) -> pb.AgentSpec:
    return pb.AgentSpec(
        agent=agent_message(spec.agent),
        project_slug=spec.project_slug,
        kind=_KIND_TO_PROTO[spec.kind],
        instructions=spec.instructions,
        primary_model=spec.primary_model,
        fallback_models=spec.fallback_models,
        model_params=struct(spec.model_params),
        tools=spec.tools,
        mcp_servers=[mcp_server_message(server) for server in spec.mcp_servers],
        sub_agents=spec.sub_agents,
        network_access=spec.network_access,
        max_steps=spec.max_steps,
        max_iterations=spec.max_iterations,
        mock_responses=list_value(spec.mock_responses),
        description=spec.description,
        expertise=spec.expertise,
        revision=spec.revision,
        version=spec.version,
        agent_names=spec.agent_names,
        double_texting=spec.double_texting,
        tool_permissions=tool_permissions_message(spec.tool_permissions),
        agent_tool_permissions=tool_permissions_message(spec.agent_tool_permissions),
        project_tool_permissions=tool_permissions_message(spec.project_tool_permissions),
        input_expiry_seconds=spec.input_expiry_seconds,
        delegation_limits=delegation_limits_message(spec.delegation_limits),
        context_budget_tokens=spec.context_budget_tokens,
        compaction_model=spec.compaction_model,
        compaction_prompt=spec.compaction_prompt,
        run_budget=run_budget_message(spec.run_budget),
    )


def delegation_limits_message(limits: DelegationLimits) -> pb.DelegationLimits | None:
    """The bounds as a message; none (unset) when they are all the defaults."""
    return pb.DelegationLimits(**limits.model_dump()) if limits != DelegationLimits() else None


def finished_run_message(result: Agent | DomainError) -> internal_pb2.FinishedAgentRun:
    if isinstance(result, DomainError):
        return internal_pb2.FinishedAgentRun(
            error_code=result.code.name, error_reason=result.reason, error_message=result.message
        )
    return internal_pb2.FinishedAgentRun(agent=agent_message(result))


def executor_message(executor: Executor) -> pb.Executor:
    return pb.Executor(
        id=executor.id,
        address=executor.address,
        heartbeat_at=timestamp(executor.heartbeat_at),
        tools=executor.tools,
        model_providers=[pb.ModelProvider(name=p.name, problem=p.problem) for p in executor.model_providers],
        run_slots=executor.run_slots,
    )


def model_providers(message: pb.Executor) -> list[ModelProvider]:
    return [ModelProvider(name=p.name, problem=p.problem) for p in message.model_providers]


def renewal_message(renewal: Renewal) -> internal_pb2.RenewRunLeasesResponse:
    return internal_pb2.RenewRunLeasesResponse(
        lost=[internal_pb2.LeasedRun(agent_id=agent_id, run_id=run_id) for agent_id, run_id in renewal.lost],
        orphans=[
            internal_pb2.OrphanedRun(
                agent_id=orphan.agent_id,
                run_id=orphan.run_id,
                session_id=orphan.session_id,
                project_id=orphan.project_id,
                agent_name=orphan.agent_name,
                input_requests=[input_request_message(request) for request in orphan.input_requests],
                parked=orphan.parked,
                cancelled_by=orphan.cancelled_by,
            )
            for orphan in renewal.orphans
        ],
        lease_seconds=renewal.lease_seconds,
        interrupted=[
            internal_pb2.LeasedRun(agent_id=agent_id, run_id=run_id)
            for agent_id, run_id in renewal.interrupted
        ],
    )


def agent_change_message(change: AgentChange) -> internal_pb2.AgentChange:
    return internal_pb2.AgentChange(
        agent_id=change.agent_id,
        status=pb.AGENT_STATUS_UNSPECIFIED if change.status is None else _STATUS_TO_PROTO[change.status],
        spec_changed=change.spec_changed,
    )
