"""The registry's domain types: users, agent types, projects, agents, executors, and pages of them.

Plain pydantic models with no I/O. They carry values, not rules: validation and lifecycle rules
live in each resource's package (`agents/`, `identity/`, `runs/`, ...) and `validation.py`,
storage in the `store` package and each resource's `store` part.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentmesh.registry.usage.models import ModelUsageReport

T = TypeVar("T")

JsonValue = Any


class Model(BaseModel):  # a registry record: immutable, refusing fields it does not know
    model_config = ConfigDict(frozen=True, extra="forbid")


class User(Model):
    """A person who signs in."""

    id: str
    email: str
    first_name: str = ""
    last_name: str = ""
    is_superuser: bool = False
    is_active: bool = True
    created_at: datetime
    # Moves on whenever the user's access tokens must stop working (see `auth.Accounts`).
    token_version: int = 0


class RegistrationMode(enum.StrEnum):
    """Who may register themselves (identity/registration.py)."""

    OPEN = "open"
    CLOSED = "closed"  # superusers create users
    INVITE_ONLY = "invite-only"  # registering needs an invitation a superuser issued


class NewUser(Model):
    """What registering a user needs (the password travels separately, as a hash)."""

    email: str
    first_name: str = ""
    last_name: str = ""
    is_superuser: bool = False


class LoginState(Model):
    """Failed sign-in bookkeeping of one throttle key (an account from one address, or one
    address across accounts: identity/sign_in_throttle.py)."""

    failed_count: int = 0
    last_failed_at: datetime | None = None
    locked_until: datetime | None = None


class Credentials(Model):
    """A user with what signing in checks: the password hash."""

    user: User
    password_hash: str


class Invitation(Model):
    """A single-use permission to register while registration is invite-only, issued by a
    superuser. Only the SHA-256 of its token is kept, as `token_hash`."""

    id: str
    token_hash: str
    created_by: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    revoked_at: datetime | None = None


class RefreshToken(Model):
    """A stored refresh token: only the hash of the token is kept. Tokens rotate within a family
    (one sign-in); reusing a rotated token revokes the whole family."""

    id: str
    user_id: str
    family_id: str
    token_hash: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None
    revoked_at: datetime | None = None


class ApiKey(Model):
    """A long-lived credential for programs, acting as its user (within one project when
    `project_id` is set). Only the SHA-256 of the secret is kept, as `key_hash`."""

    id: str
    user_id: str
    name: str
    prefix: str
    key_hash: str
    project_id: str | None = None
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None


class UserStatus(Model):
    """What a gateway needs to know of a user to honour its tokens: whether it still exists and
    is active, its role, and its current token version."""

    exists: bool
    is_active: bool = False
    is_superuser: bool = False
    token_version: int = 0


class IssuedTokens(Model):
    """What a sign-in or a refresh yields."""

    access_token: str
    refresh_token: str
    token_type: str = "bearer"
    expires_in: int


class AgentKind(enum.StrEnum):
    LLM = "llm"
    LOOP = "loop"
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class McpServer(Model):
    """A Model Context Protocol server an agent takes tools from. In an agent type, one with a
    name and nothing else (no transport) refers to the registered server of that name. `env` and
    `headers` values are secrets (see `mcp_servers/registry.py`)."""

    name: str
    transport: str = ""
    command: str = ""
    args: list[str] = Field(default_factory=list)
    url: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)

    @property
    def is_reference(self) -> bool:
        return self == McpServer(name=self.name)


MCP_SERVER_FIELDS: tuple[str, ...] = tuple(McpServer.model_fields)


class RegisteredMcpServer(McpServer):
    """An MCP server registered in the registry (superusers): global when `project_id` is empty,
    else usable by that project's agents only, where it hides a global one of the same name."""

    id: str
    project_id: str = ""
    created_at: datetime
    updated_at: datetime


class ToolPermission(enum.StrEnum):
    """Whether an agent may call a tool on its own (`allow`), after a person approved the call
    (`ask`), or not at all (`deny`). Stricter is later: the strictest of an agent's rule maps
    counts (`tools/permissions.py` on the executor decides)."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


# A tool name or glob pattern → its permission (`mcp:*`, `delegate:*`, `get_current_time`).
ToolPermissions = dict[str, ToolPermission]
DEFAULT_INPUT_EXPIRY_SECONDS = 86_400


class DelegationLimits(Model):
    """Bounds on the delegation tree under a chat, as the delegating agent's type sets them; 0:
    the executor's default."""

    max_per_step: int = 0
    max_per_chat: int = 0
    allow_reentry: bool = False


class RunBudget(Model):
    """What one run (with its delegations) may spend: tokens, US dollars; 0: no bound."""

    max_tokens: int = 0
    max_cost: float = 0.0


class AgentTypeFields(Model):
    """The settable fields of an agent type: what a create carries and an update may change."""

    name: str = ""
    slug: str = ""
    description: str = ""
    expertise: list[str] = Field(default_factory=list)
    personality_prompt: str = ""
    primary_model: str = ""
    fallback_models: list[str] = Field(default_factory=list)
    model_params: dict[str, JsonValue] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)
    mcp_servers: list[McpServer] = Field(default_factory=list)
    kind: AgentKind = AgentKind.LLM
    sub_agents: list[str] = Field(default_factory=list)
    max_steps: int = 0
    max_iterations: int = 0
    is_active: bool = True
    tool_permissions: ToolPermissions = Field(default_factory=dict)
    input_expiry_seconds: int = 0  # how long a request for input waits; 0: the default
    delegation_limits: DelegationLimits = Field(default_factory=DelegationLimits)
    context_budget_tokens: int = 0  # the prompt's budget; 0: the executor's default for the model
    compaction_model: str = ""  # summarizes history beyond the budget; "": the agent's model
    compaction_prompt: str = ""  # the summarizing instructions; "": the executor's built-in ones
    run_budget: RunBudget = Field(default_factory=lambda: RunBudget())


AGENT_TYPE_FIELDS: tuple[str, ...] = tuple(AgentTypeFields.model_fields)


class AgentType(AgentTypeFields):
    """A template that agents are spawned from. Superusers manage them."""

    id: str
    created_at: datetime
    updated_at: datetime


# What a project's limits are named (DESIGN §12), in the order they are listed.
LIMIT_NAMES: tuple[str, ...] = (
    "requests_per_minute",
    "concurrent_runs",
    "open_streams",
    "tokens_per_day",
    "stored_bytes",
    # Budgets: what the project's runs may spend a UTC day or month (projects/budgets.py).
    "tokens_per_month",
    "cost_per_day",
    "cost_per_month",
)


class ProjectLimits(Model):
    """What one project may use. None: the operator's default applies; 0: unlimited."""

    requests_per_minute: int | None = None
    concurrent_runs: int | None = None
    open_streams: int | None = None
    tokens_per_day: int | None = None
    stored_bytes: int | None = None
    tokens_per_month: int | None = None
    cost_per_day: float | None = None  # US dollars
    cost_per_month: float | None = None

    def set(self) -> dict[str, float]:
        """The limits this project sets itself, by name."""
        return {name: value for name in LIMIT_NAMES if (value := getattr(self, name)) is not None}


class ProjectFields(Model):
    """The settable fields of a project."""

    name: str = ""
    slug: str = ""
    description: str = ""
    # The owner's rules for every agent of the project: they only tighten the types' rules.
    tool_permissions: ToolPermissions = Field(default_factory=dict)
    # Set by superusers; the owner may lower them (`projects/limits.py`).
    limits: ProjectLimits = Field(default_factory=ProjectLimits)


PROJECT_FIELDS: tuple[str, ...] = tuple(ProjectFields.model_fields)


class Project(ProjectFields):
    """Groups agents and sessions; only its owner and superusers see it."""

    id: str
    owner_id: str
    created_at: datetime
    updated_at: datetime


class AgentStatus(enum.StrEnum):
    IDLE = "idle"
    WORKING = "working"
    PAUSED = "paused"
    TERMINATED = "terminated"
    # No run in flight, and at least one suspended: it waits for a person's input.
    WAITING = "waiting"


# What a message for a session whose run is in flight does (double texting, `runs/turns.py`).
DOUBLE_TEXTING_POLICIES = ("reject", "enqueue", "interrupt")
DEFAULT_DOUBLE_TEXTING = "enqueue"


class AgentConfig(Model):
    """Per-agent overrides of its type; None keeps the type's value (`double_texting`: None is
    the default policy, enqueue)."""

    instructions: str | None = None
    primary_model: str | None = None
    model_params: dict[str, JsonValue] | None = None
    max_steps: int | None = None
    max_iterations: int | None = None
    tools: list[str] | None = None
    sub_agents: list[str] | None = None
    network_access: list[str] | None = None
    mock_responses: list[JsonValue] | None = None
    double_texting: str | None = None
    tool_permissions: ToolPermissions | None = None  # they only tighten the type's


AGENT_CONFIG_FIELDS: tuple[str, ...] = tuple(AgentConfig.model_fields)


class NewAgent(Model):
    """What spawning an agent needs. `slug` is made from the name when empty."""

    project_id: str
    agent_type_id: str
    name: str
    slug: str = ""
    config: AgentConfig = AgentConfig()
    public: bool = False


class Agent(Model):
    """An instance spawned from an agent type into a project. `name` is display text as people
    write it ("My PO Agent"), `slug` a DNS label unique in the project (`my-po-agent`); either
    addresses the agent. `runs_in_flight` is how many runs have started and not finished, and
    `runs_waiting` how many are suspended (waiting for a person's input, holding no executor);
    unless the agent is paused or terminated, its status is `working` while a run is in flight,
    else `waiting` while a run is suspended, else `idle`."""

    id: str
    name: str
    slug: str
    project_id: str
    agent_type_id: str
    status: AgentStatus
    config: AgentConfig = AgentConfig()
    # Published by its owner: its card is served without credentials and listed in the gateway's
    # discovery index (docs/a2a.md). Not part of what a run uses, so no version records it.
    public: bool = False
    tasks_completed: int = 0
    tokens_used: int = 0
    cost: float = 0.0
    runs_in_flight: int = 0
    runs_waiting: int = 0
    created_at: datetime
    last_activity_at: datetime


class AgentVersion(Model):
    """One immutable snapshot of what an agent's runs use: its type as it was (MCP server secrets
    as the registry stores them) and its config overrides, numbered from 1 per agent, with who
    made the change (a user id; empty when the registry did) and when. Status and usage are the
    agent's, not a version's."""

    agent_id: str
    project_id: str
    number: int
    agent_type: AgentType
    config: AgentConfig = AgentConfig()
    created_at: datetime
    created_by: str = ""


class AgentMetrics(Model):
    """Usage figures of one agent, in the shape of the REST metrics route."""

    total_instances: int
    active_instances: int
    idle_instances: int
    total_tasks_completed: int
    total_tokens_used: int
    total_cost_incurred: float


class AgentSpec(Model):
    """An agent with its type's settings and its overrides resolved: what an executor runs.
    `sub_agents` and `network_access` hold slugs where they name an agent of the project (they
    may be written with names); `agent_names` maps those slugs to the agents' names."""

    agent: Agent
    project_slug: str
    kind: AgentKind
    instructions: str
    primary_model: str
    fallback_models: list[str]
    model_params: dict[str, JsonValue]
    tools: list[str]
    mcp_servers: list[McpServer]
    sub_agents: list[str]
    network_access: list[str]
    max_steps: int
    max_iterations: int
    mock_responses: list[JsonValue]
    description: str
    expertise: list[str]
    revision: str
    agent_names: dict[str, str] = Field(default_factory=dict)
    double_texting: str = DEFAULT_DOUBLE_TEXTING
    # The rule maps whose strictest decision counts for each tool: the type's, the agent's own
    # and the project's.
    tool_permissions: ToolPermissions = Field(default_factory=dict)
    agent_tool_permissions: ToolPermissions = Field(default_factory=dict)
    project_tool_permissions: ToolPermissions = Field(default_factory=dict)
    input_expiry_seconds: int = DEFAULT_INPUT_EXPIRY_SECONDS
    delegation_limits: DelegationLimits = Field(default_factory=DelegationLimits)
    context_budget_tokens: int = 0
    compaction_model: str = ""
    compaction_prompt: str = ""
    run_budget: RunBudget = Field(default_factory=lambda: RunBudget())
    version: int = 0  # the agent's version this is (0: not known)


RunKey = tuple[str, str]  # (agent id, run id): a run, as leases and session turns name it


class FinishedRun(Model):
    """A run an executor reports finished, with its usage: in all (for the agent's counters), and
    per model its own calls used (for the cost ledger), with its session and user."""

    agent_id: str
    run_id: str
    completed: bool
    tokens_used: int
    cost: float
    # Cancelled rather than failed (never with `completed`): its end is reported as a cancel.
    cancelled: bool = False
    session_id: str = ""
    user_id: str = ""
    model_usage: tuple[ModelUsageReport, ...] = ()


class ModelProvider(Model):
    """A model provider as one executor has it: `problem` says what keeps it from answering
    (with the setting that fixes it), empty when it is ready."""

    name: str
    problem: str = ""


class Executor(Model):
    """A member of the executor pool, with what it offers agents: function tools and model
    providers (reported with every heartbeat)."""

    id: str
    address: str
    heartbeat_at: datetime
    tools: list[str] = []
    model_providers: list[ModelProvider] = []
    # How many runs it takes at once (0: not said).
    run_slots: int = 0


class PageRequest(Model):
    """Which slice of a list to read: after a keyset position, or after the first `skip` items
    (REST `page` N skips (N-1)·size; stores reach it by keyset, never by OFFSET)."""

    size: int
    after: tuple[datetime, str] | None = None
    skip: int = 0


class Slice(Model, Generic[T]):
    """What a store returns for a PageRequest."""

    items: list[T]
    has_more: bool
    total: int


class Page(Model, Generic[T]):
    """One page of a list, with the token of the next page (empty on the last) and the total."""

    items: list[T]
    next_page_token: str = ""
    total_size: int = 0
