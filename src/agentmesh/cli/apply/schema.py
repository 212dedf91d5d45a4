"""The apply file's format: pydantic models of one YAML document that forbid unknown fields and take
the YAML's own types, so that a file's every mistake is named by its path before anything is read
from the registry."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

FORMAT_VERSION = 1
# The messages' int32 fields: a larger number is the file's mistake, named like any other.
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Permission = Literal["allow", "ask", "deny"]


class _Entry(BaseModel):
    # Strict: YAML has real types, so `max_steps: "5"` or `name: 123` are mistakes worth reporting.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class McpServerEntry(_Entry):
    """An MCP server an agent type takes tools from, defined inline."""

    name: str
    transport: Literal["stdio", "streamable_http"]
    command: str = ""
    args: list[str] = []
    url: str = ""
    env: dict[str, str] = {}
    headers: dict[str, str] = {}


class RegisteredMcpServerEntry(_Entry):
    """An MCP server registered in the registry (kind McpServer): global, or one project's;
    found by `project` and `name`. Env and header values are write-only secrets."""

    name: str
    project: str = ""
    transport: Literal["stdio", "streamable_http"]
    command: str = ""
    args: list[str] = []
    url: str = ""
    env: dict[str, str] = {}
    headers: dict[str, str] = {}


MCP_SERVER_FIELDS = ("transport", "command", "args", "url", "env", "headers")


class DelegationLimitsEntry(_Entry):
    """An agent type's delegation bounds; 0 keeps the executor's default."""

    max_per_step: Int32 = 0
    max_per_chat: Int32 = 0
    allow_reentry: bool = False


class RunBudgetEntry(_Entry):
    """What one run of the type (with its delegations) may spend; 0: no bound."""

    max_tokens: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    max_cost: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0


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
    mcp_servers: list[str | McpServerEntry] = []  # a registered server's name, or one inline
    kind: Literal["llm", "loop", "sequential", "parallel"] = "llm"
    sub_agents: list[str] = []
    max_steps: Int32 = 0
    max_iterations: Int32 = 0
    is_active: bool = True
    # Tool name or glob → allow, ask or deny (docs/human-in-the-loop.md).
    tool_permissions: dict[str, Permission] = {}
    input_expiry_seconds: Int32 = 0
    # Bounds on the delegation tree under a chat (docs/executor.md, "Bounded delegation trees").
    delegation_limits: DelegationLimitsEntry = DelegationLimitsEntry()
    # The prompt's budget and the model that summarizes what does not fit (docs/sessions.md).
    context_budget_tokens: Int32 = 0
    compaction_model: str = ""
    compaction_prompt: str = ""  # the summarizing instructions; empty: the built-in ones
    run_budget: RunBudgetEntry = RunBudgetEntry()  # docs/tenants.md, "Budgets"


class AgentConfigEntry(_Entry):
    """An agent's overrides of its type; `null` clears one."""

    instructions: str | None = None
    primary_model: str | None = None
    model_params: dict[str, JsonValue] | None = None
    max_steps: Int32 | None = None
    max_iterations: Int32 | None = None
    tools: list[str] | None = None
    sub_agents: list[str] | None = None
    network_access: list[str] | None = None
    mock_responses: list[JsonValue] | None = None
    # A message for a session whose run is in flight (docs/durability.md): default enqueue.
    double_texting: Literal["reject", "enqueue", "interrupt"] | None = None
    tool_permissions: dict[str, Permission] | None = None  # they only tighten the type's


class AgentEntry(_Entry):
    """An agent of a project, spawned from the agent type with slug `type`; found by `name` (or
    `slug`, made from the name when left out)."""

    name: str
    slug: str = ""
    type: str
    config: AgentConfigEntry = AgentConfigEntry()
    # Published: its A2A card is served without credentials (docs/a2a.md). Left out: a new
    # agent is private, an existing one keeps what it is.
    public: bool | None = None


class RemoteAgentEntry(_Entry):
    """A remote A2A agent of the project (kind RemoteAgent), found by `name`: the project's agents
    may name it in `network_access`. The credential is write-only (compared by presence only)."""

    name: str
    card_url: str
    credential: str = ""
    description: str = ""


class ScheduleEntry(_Entry):
    """A schedule of the project (docs/schedules.md), found by `name`: its agent runs at each due
    time of `cron` in `time_zone`, as whoever applied the file first."""

    name: str
    agent: str
    message: str
    cron: str
    time_zone: str = "UTC"
    session_policy: str = "new"
    missed_policy: str = "skip"
    overlap_policy: str = "skip"
    enabled: bool = True


class LimitsEntry(_Entry):
    """A project's limits (docs/tenants.md): left out, the operator's default; 0, unlimited. Only
    a superuser may raise one."""

    requests_per_minute: int | None = Field(default=None, ge=0)
    concurrent_runs: int | None = Field(default=None, ge=0)
    open_streams: int | None = Field(default=None, ge=0)
    tokens_per_day: int | None = Field(default=None, ge=0)
    stored_bytes: int | None = Field(default=None, ge=0)
    tokens_per_month: int | None = Field(default=None, ge=0)
    cost_per_day: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # US dollars
    cost_per_month: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class ProjectEntry(_Entry):
    """A project, its remote A2A agents and its agents; found by `slug` (made from `name` when
    left out)."""

    name: str
    slug: str = ""
    description: str = ""
    tool_permissions: dict[str, Permission] = {}  # the owner's, for every agent: they only tighten
    limits: LimitsEntry = LimitsEntry()  # as a whole: a limit left out is the operator's default
    remote_agents: list[RemoteAgentEntry] = []
    agents: list[AgentEntry] = []
    schedules: list[ScheduleEntry] = []


class ApplyDocument(_Entry):
    """One YAML document of an apply file."""

    version: Literal[1] = FORMAT_VERSION
    agent_types: list[AgentTypeEntry] = []
    projects: list[ProjectEntry] = []
    mcp_servers: list[RegisteredMcpServerEntry] = []
