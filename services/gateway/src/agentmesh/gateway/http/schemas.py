"""The JSON bodies of the REST API and the agent endpoints (DESIGN §6, field names are contract).

Request models reject unknown fields (422) and anything a proto field could not hold — numbers
outside int32, non-finite floats, NUL characters — so a bad request fails here with a message
naming the field, never deeper in the mesh.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model, model_validator

from agentmesh.memory.client import event_type_names
from agentmesh.registry.declarations import AgentConfig
from agentmesh.runtime.limits import MAX_JSON_DEPTH, has_lone_surrogate

T = TypeVar("T")
INT32_MAX = 2**31 - 1

Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
AgentKindName = Literal["llm", "loop", "sequential", "parallel"]
AgentStatusName = Literal["idle", "working", "waiting", "paused", "terminated"]
ToolPermissionName = Literal["allow", "ask", "deny"]
# A tool's name or glob pattern → its permission (docs/human-in-the-loop.md).
ToolPermissions = Annotated[
    dict[str, ToolPermissionName],
    Field(description='tool name or glob pattern ("mcp:*", "delegate:*") → allow, ask or deny'),
]
ExpirySeconds = Annotated[int, Field(ge=0, le=30 * 86_400)]
BudgetTokens = Annotated[int, Field(ge=0, le=10_000_000)]
# The memory service's event type names, as one Literal so OpenAPI lists them.
EventTypeName = Literal[tuple(event_type_names())]  # type: ignore[valid-type]


def check_storable(value: Any, path: str, *, depth: int = 0, within: str = "") -> None:
    """Raises ValueError naming `path` when a JSON value holds what no proto field can store:
    NUL characters, lone surrogates, non-finite numbers, or objects and arrays nested deeper than
    `MAX_JSON_DEPTH` (named by the field they sit in, `within`: the first two levels of `path`)."""
    if depth <= 2:
        within = path
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{path}: must not contain NUL characters")
        if has_lone_surrogate(value):
            raise ValueError(f"{path}: must be valid Unicode text (it holds a lone surrogate)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: must be a finite number")
    elif isinstance(value, dict | list):
        if depth >= MAX_JSON_DEPTH:
            raise ValueError(
                f"{within}: must not nest objects and arrays more than {MAX_JSON_DEPTH} levels deep"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                check_storable(key, path, depth=depth, within=within)
                check_storable(item, f"{path}.{key}", depth=depth + 1, within=within)
        else:
            for index, item in enumerate(value):
                check_storable(item, f"{path}[{index}]", depth=depth + 1, within=within)


class RequestBody(BaseModel):
    """A request body: unknown fields are errors, never silently dropped."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                check_storable(value, str(key))
        return data


def _unchanged() -> Any:
    """A PATCH field: absent means unchanged (it never takes this default)."""

    def drop_default(schema: dict[str, Any]) -> None:
        schema.pop("default", None)

    return Field(default=None, json_schema_extra=drop_default)


# Identity.


class RegisterRequest(RequestBody):
    email: str
    password: str = Field(description="at least 12 characters (the registry's setting); not a common one")
    first_name: str = ""
    last_name: str = ""
    invitation_token: str = Field(
        default="", max_length=200, description="the invitation, when registration is invite-only"
    )


class LoginRequest(RequestBody):
    email: str
    password: str


class RefreshRequest(RequestBody):
    refresh_token: str


class TokensOut(BaseModel):
    access_token: str
    refresh_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int


class UserOut(BaseModel):
    id: str
    email: str
    first_name: str
    last_name: str
    is_superuser: bool
    is_active: bool
    created_at: datetime | None


class UserUpdate(RequestBody):
    """Only the fields present change."""

    is_active: bool = _unchanged()
    is_superuser: bool = _unchanged()


# Agent types.


class McpServerBody(RequestBody):
    """An MCP server defined inline. `env` and `headers` values are secrets: written, never shown
    (answers show "********"; sending that back keeps the value). A value may be `${env:NAME}`,
    read from the executor's environment."""

    name: str
    transport: str = Field(description='"stdio" or "streamable_http"')
    command: str = ""
    args: list[str] = Field(default_factory=list)
    url: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)


class McpServerOut(BaseModel):
    name: str
    transport: str
    command: str
    args: list[str]
    url: str
    env: dict[str, str] = Field(description='values masked: "********"')
    headers: dict[str, str] = Field(description='values masked: "********"')


# An agent type's MCP server: the name of a registered one, or an inline definition.
McpServerRef = Annotated[str, Field(min_length=1, description="the name of a registered MCP server")]


class DelegationLimitsBody(RequestBody):
    """Bounds on the delegation tree under a chat, for the delegating agents of a type: past one,
    a delegation is refused and the model gets the refusal as the delegation's result."""

    max_per_step: Annotated[int, Field(ge=0, le=64)] = Field(
        default=0, description="delegations one model step may send (0: the executor's default, 4)"
    )
    max_per_chat: Annotated[int, Field(ge=0, le=10_000)] = Field(
        default=0,
        description="delegations the whole tree under one chat may send (0: the executor's default, 50)",
    )
    allow_reentry: bool = Field(
        default=False, description="may delegate to an agent already on its delegation path (A → B → A)"
    )


class RunBudgetBody(RequestBody):
    """What one run (with its delegations) may spend; 0: no bound."""

    max_tokens: int = Field(default=0, ge=0, description="most tokens, input and output")
    max_cost: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="most US dollars")


class AgentTypeCreate(RequestBody):
    name: str
    slug: str
    description: str = ""
    expertise: list[str] = Field(default_factory=list)
    personality_prompt: str = ""
    primary_model: str = ""
    fallback_models: list[str] = Field(default_factory=list)
    model_params: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[McpServerRef | McpServerBody] = Field(default_factory=list)
    kind: AgentKindName = "llm"
    sub_agents: list[str] = Field(default_factory=list)
    max_steps: Count = 0
    max_iterations: Count = 0
    is_active: bool = True
    tool_permissions: ToolPermissions = Field(default_factory=dict)
    input_expiry_seconds: ExpirySeconds = Field(
        default=0, description="how long a request for a person's input waits (0: a day)"
    )
    delegation_limits: DelegationLimitsBody = Field(default_factory=DelegationLimitsBody)
    context_budget_tokens: BudgetTokens = Field(
        default=0, description="the prompt's budget in tokens (0: the executor's default for the model)"
    )
    compaction_model: str = Field(
        default="", description="the model that summarizes history beyond the budget (empty: the agent's)"
    )
    compaction_prompt: str = Field(
        default="", description="the instructions it summarizes with (empty: the executor's built-in ones)"
    )
    run_budget: RunBudgetBody = Field(default_factory=RunBudgetBody)


class AgentTypeUpdate(RequestBody):
    """Only the fields present change."""

    name: str = _unchanged()
    slug: str = _unchanged()
    description: str = _unchanged()
    expertise: list[str] = _unchanged()
    personality_prompt: str = _unchanged()
    primary_model: str = _unchanged()
    fallback_models: list[str] = _unchanged()
    model_params: dict[str, Any] = _unchanged()
    tools: list[str] = _unchanged()
    mcp_servers: list[McpServerRef | McpServerBody] = _unchanged()
    kind: AgentKindName = _unchanged()
    sub_agents: list[str] = _unchanged()
    max_steps: Count = _unchanged()
    max_iterations: Count = _unchanged()
    is_active: bool = _unchanged()
    tool_permissions: ToolPermissions = _unchanged()
    input_expiry_seconds: ExpirySeconds = _unchanged()
    delegation_limits: DelegationLimitsBody = _unchanged()
    context_budget_tokens: BudgetTokens = _unchanged()
    compaction_model: str = _unchanged()
    compaction_prompt: str = _unchanged()
    run_budget: RunBudgetBody = _unchanged()


class AgentTypeOut(BaseModel):
    id: str
    name: str
    slug: str
    description: str
    expertise: list[str]
    personality_prompt: str
    primary_model: str
    fallback_models: list[str]
    model_params: dict[str, Any]
    tools: list[str]
    mcp_servers: list[str | McpServerOut]
    kind: AgentKindName
    sub_agents: list[str]
    max_steps: int
    max_iterations: int
    is_active: bool
    created_at: datetime | None
    updated_at: datetime | None
    tool_permissions: dict[str, ToolPermissionName]
    input_expiry_seconds: int
    delegation_limits: DelegationLimitsBody
    context_budget_tokens: int
    compaction_model: str
    compaction_prompt: str
    run_budget: RunBudgetBody


# Projects.


# A project limit (docs/tenants.md): null or absent, the operator's default; 0, unlimited.
Limit = Annotated[int | None, Field(ge=0, le=2**53 - 1)]
# A budget in US dollars (docs/usage.md): the same, as a number.
CostLimit = Annotated[float | None, Field(ge=0, le=2**53 - 1, allow_inf_nan=False)]


class ProjectLimits(RequestBody):
    """What one project may use. Only superusers raise a limit; the owner may lower one."""

    requests_per_minute: Limit = None
    concurrent_runs: Limit = None
    open_streams: Limit = None
    tokens_per_day: Limit = None
    stored_bytes: Limit = None
    tokens_per_month: Limit = None
    cost_per_day: CostLimit = None
    cost_per_month: CostLimit = None


class ProjectCreate(RequestBody):
    name: str
    slug: str
    description: str = ""
    tool_permissions: ToolPermissions = Field(default_factory=dict)
    limits: ProjectLimits = Field(default_factory=ProjectLimits)


class ProjectUpdate(RequestBody):
    """Only the fields present change."""

    name: str = _unchanged()
    slug: str = _unchanged()
    description: str = _unchanged()
    tool_permissions: ToolPermissions = _unchanged()
    # Replaces the project's limits as a whole: a limit left out falls back to the default.
    limits: ProjectLimits = _unchanged()


class ProjectOut(BaseModel):
    id: str
    name: str
    slug: str
    description: str
    owner_id: str
    created_at: datetime | None
    updated_at: datetime | None
    tool_permissions: dict[str, ToolPermissionName]
    # The limits the project sets; null ones are the operator's defaults.
    limits: ProjectLimits


# Agents.


def _agent_config_shape(name: str, doc: str, base: type[BaseModel], integer: Any) -> Any:
    """A JSON shape of an agent's config overrides, field for field the registry's AgentConfig
    (their one definition), every field optional; its integer fields typed as `integer`."""
    fields: dict[str, Any] = {
        field: (integer if info.annotation == int | None else info.annotation, None)
        for field, info in AgentConfig.model_fields.items()
    }
    return create_model(name, __base__=base, __doc__=doc, __module__=__name__, **fields)


# Requests bound the step counts to what the int32 proto fields hold.
AgentConfigBody = _agent_config_shape(
    "AgentConfigBody",
    "Overrides of the agent type; null (or absent) keeps the type's value.",
    RequestBody,
    Count | None,
)
AgentConfigOut = _agent_config_shape(
    "AgentConfigOut",
    "Overrides of the agent type; null where the type's value applies.",
    BaseModel,
    int | None,
)


class AgentCreate(RequestBody):
    agent_type_id: str
    project_id: str | None = Field(default=None, description="defaults to the project in the path")
    name: str = Field(description='display name, 1-100 characters ("My PO Agent")')
    slug: str = Field(
        default="", description="DNS label unique in the project; made from the name when empty"
    )
    config: AgentConfigBody = Field(default_factory=AgentConfigBody)
    public: bool = Field(
        default=False,
        description="published: its A2A card is served without credentials and the gateway's"
        " discovery index lists it",
    )
    # Strict: a string or a number here is a mistake to report, never a truthy "false".
    replace_terminated: StrictBool = Field(
        default=False,
        description="when the project's agent of this name or slug is terminated, it gives them up"
        " (renamed `<name> (terminated <id>)`) and this agent takes them; a live agent's name stays"
        " taken (409)",
    )


class AgentUpdate(RequestBody):
    """What is present changes: the config overrides present (a null override falls back to the
    type's value), and `public`."""

    config: AgentConfigBody = _unchanged()
    public: bool = _unchanged()


class AgentOut(BaseModel):
    id: str
    name: str
    slug: str
    project_id: str
    agent_type_id: str
    status: AgentStatusName
    config: AgentConfigOut
    public: bool
    tasks_completed: int
    tokens_used: int
    cost: float
    created_at: datetime | None
    last_activity_at: datetime | None


class AgentMetricsOut(BaseModel):
    total_instances: int
    active_instances: int
    idle_instances: int
    total_tasks_completed: int
    total_tokens_used: int
    total_cost_incurred: float


class MessageOut(BaseModel):
    message: str


# Lists.


class Pagination(BaseModel):
    total: int
    page: int
    page_size: int
    total_pages: int


class Page(BaseModel, Generic[T]):
    data: list[T]
    pagination: Pagination


# Agent runtime endpoints.


class AgentHealthOut(BaseModel):
    status: Literal["healthy", "paused", "terminated", "unknown"]
    name: str
    slug: str


class AgentCardOut(BaseModel):
    name: str
    slug: str
    description: str
    url: str
    version: str
    capabilities: list[Literal["streaming", "tool_calling", "task_delegation"]]
    skills: list[str]


class HealthOut(BaseModel):
    status: str


class ReadinessOut(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, Literal["serving", "not serving"]]


class ErrorOut(BaseModel):
    detail: Any
