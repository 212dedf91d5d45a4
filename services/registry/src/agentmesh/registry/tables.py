"""The registry's tables, as SQLAlchemy ORM rows. The migrations build this schema; the
SQL store is the only reader of these classes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agentmesh.registry.columns import UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UserRow(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(sa.String(255))
    first_name: Mapped[str] = mapped_column(sa.String(100))
    last_name: Mapped[str] = mapped_column(sa.String(100))
    is_superuser: Mapped[bool] = mapped_column(sa.Boolean)
    is_active: Mapped[bool] = mapped_column(sa.Boolean)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    token_version: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")


# Columns no service of this release reads or writes, kept in the schema for the previous
# release's services while an upgrade rolls (expand/contract, docs/upgrades.md): each is nullable
# or has a server default, so this release's inserts need not name it. A later release's
# migration drops them, once no running service reads them.
RETIRED_COLUMNS = frozenset(
    {
        ("users", "failed_login_count"),
        ("users", "last_failed_login_at"),
        ("users", "locked_until"),
    }
)


class SignInFailureRow(Base):
    """Failed sign-ins of one throttle key: the SHA-256 of an account and address, or of an
    address alone (identity/sign_in_throttle.py). Rows of keys quiet for a window are pruned."""

    __tablename__ = "sign_in_failures"

    key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    failed_count: Mapped[int] = mapped_column(sa.Integer)
    last_failed_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    locked_until: Mapped[datetime | None] = mapped_column(UtcDateTime)


class InvitationRow(Base):
    """An invitation to register: only the SHA-256 of its token is stored."""

    __tablename__ = "invitations"
    __table_args__ = (sa.Index(None, "created_at", "id"),)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_by: Mapped[str] = mapped_column(sa.String(36))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class RefreshTokenRow(Base):
    __tablename__ = "refresh_tokens"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    family_id: Mapped[str] = mapped_column(sa.String(36), index=True)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AgentTypeRow(Base):
    __tablename__ = "agent_types"
    __table_args__ = (sa.Index(None, "created_at", "id"),)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    slug: Mapped[str] = mapped_column(sa.String(63), unique=True)
    description: Mapped[str] = mapped_column(sa.Text)
    expertise: Mapped[list[str]] = mapped_column(sa.JSON)
    personality_prompt: Mapped[str] = mapped_column(sa.Text)
    primary_model: Mapped[str] = mapped_column(sa.String(200))
    fallback_models: Mapped[list[str]] = mapped_column(sa.JSON)
    model_params: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    tools: Mapped[list[str]] = mapped_column(sa.JSON)
    mcp_servers: Mapped[list[dict[str, Any]]] = mapped_column(sa.JSON)
    kind: Mapped[str] = mapped_column(sa.String(20))
    sub_agents: Mapped[list[str]] = mapped_column(sa.JSON)
    max_steps: Mapped[int] = mapped_column(sa.Integer)
    max_iterations: Mapped[int] = mapped_column(sa.Integer)
    is_active: Mapped[bool] = mapped_column(sa.Boolean)
    # Tool name or glob → "allow" | "ask" | "deny" (migration 0011), and how long its agents'
    # requests for input wait (0: the default).
    tool_permissions: Mapped[dict[str, str]] = mapped_column(sa.JSON, server_default="{}")
    input_expiry_seconds: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    delegation_limits: Mapped[dict[str, object]] = mapped_column(sa.JSON, server_default="{}")
    # The prompt's token budget (0: the executor's default) and the model that summarizes what
    # does not fit ("": the agent's own); migration 0015_context_budget.
    context_budget_tokens: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    compaction_model: Mapped[str] = mapped_column(sa.String(200), server_default="")
    # The compaction model's instructions ("": the executor's built-in ones); migration 0020_sessions.
    compaction_prompt: Mapped[str] = mapped_column(sa.Text, server_default="")
    # What one run may spend (migration 0016): {"max_tokens": n, "max_cost": usd}.
    run_budget: Mapped[dict[str, Any]] = mapped_column(sa.JSON, server_default="{}")
    request_id: Mapped[str | None] = mapped_column(sa.String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ProjectRow(Base):
    __tablename__ = "projects"
    __table_args__ = (
        sa.UniqueConstraint("owner_id", "request_id"),
        sa.Index(None, "created_at", "id"),
        sa.Index(None, "owner_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200))
    slug: Mapped[str] = mapped_column(sa.String(63), unique=True)
    description: Mapped[str] = mapped_column(sa.Text)
    owner_id: Mapped[str] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"))
    request_id: Mapped[str | None] = mapped_column(sa.String(200))
    # The owner's tool permissions for every agent of the project, which only tighten.
    tool_permissions: Mapped[dict[str, str]] = mapped_column(sa.JSON, server_default="{}")
    # The limits the project sets itself, by name (the rest are the operator's defaults).
    limits: Mapped[dict[str, int]] = mapped_column(sa.JSON, server_default="{}")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ProjectTokenDayRow(Base):
    """The model tokens a project's finished runs used on one day (UTC), for its `tokens_per_day`
    limit (migration 0012)."""

    __tablename__ = "project_token_days"

    project_id: Mapped[str] = mapped_column(
        sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[str] = mapped_column(sa.String(10), primary_key=True)  # YYYY-MM-DD
    tokens: Mapped[int] = mapped_column(sa.BigInteger)


class AgentRow(Base):
    __tablename__ = "agents"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "name"),
        sa.UniqueConstraint("project_id", "slug"),
        sa.UniqueConstraint("project_id", "request_id"),
        sa.Index(None, "project_id", "created_at", "id"),
        # The discovery index's keyset query: the public agents across projects, oldest first.
        sa.Index(None, "public", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.ForeignKey("projects.id", ondelete="CASCADE"))
    agent_type_id: Mapped[str] = mapped_column(
        sa.ForeignKey("agent_types.id", ondelete="RESTRICT"), index=True
    )
    name: Mapped[str] = mapped_column(sa.String(100))
    slug: Mapped[str] = mapped_column(sa.String(63))
    status: Mapped[str] = mapped_column(sa.String(20))
    config: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    # Published by its owner (migration 0019); the discovery index reads the public ones.
    public: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())
    tasks_completed: Mapped[int] = mapped_column(sa.BigInteger)
    tokens_used: Mapped[int] = mapped_column(sa.BigInteger)
    cost: Mapped[float] = mapped_column(sa.Float)
    runs_in_flight: Mapped[int] = mapped_column(sa.Integer)
    # Suspended runs, waiting for a person's input (status `waiting` when none is in flight).
    runs_waiting: Mapped[int] = mapped_column(sa.Integer, server_default="0")
    request_id: Mapped[str | None] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_activity_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AgentVersionRow(Base):
    """An agent's version (migration 0017): its type and config as they were; deleted with its
    agent's project."""

    __tablename__ = "agent_versions"
    __table_args__ = (sa.Index(None, "project_id"),)

    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    agent_type: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    config: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    created_by: Mapped[str] = mapped_column(sa.String(200))


class SessionAgentVersionRow(Base):
    """The version of an agent a session's runs use (migration 0017): set by the session's first
    run of the agent, changed by a move; deleted with the agent's project."""

    __tablename__ = "session_agent_versions"
    __table_args__ = (sa.Index(None, "project_id", "session_id"),)

    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    session_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    version: Mapped[int] = mapped_column(sa.Integer)
    pinned_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AgentRunRow(Base):
    __tablename__ = "agent_runs"

    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # The lease (migration 0005): who runs it, until when, and where its events go.
    session_id: Mapped[str] = mapped_column(sa.String(200), server_default="")
    executor_id: Mapped[str] = mapped_column(sa.String(200), server_default="")
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True, index=True)
    orphaned: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())
    # Parked while it waits for a person's input (migration 0011): no executor holds it, and it is
    # not handed to one until its requests are answered or expire.
    suspended: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())
    cancelled_by: Mapped[str] = mapped_column(sa.Text, server_default="")  # while parked (0024): who, why


class InputRequestRow(Base):
    """A suspended run's request for a person's input and its one response (migration 0011)."""

    __tablename__ = "input_requests"
    __table_args__ = (
        sa.Index("ix_input_requests_project_state", "project_id", "state", "created_at"),
        sa.Index("ix_input_requests_run", "agent_id", "run_id"),
        sa.Index("ix_input_requests_pending_expiry", "state", "expires_at"),
    )

    id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.ForeignKey("projects.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(sa.String(200))
    session_id: Mapped[str] = mapped_column(sa.String(200))
    state: Mapped[str] = mapped_column(sa.String(20))  # pending | answered | expired
    # The request (the domain model `InputRequest` in JSON, without state and response: the
    # proto's field names), and its one response (`InputResponse` in JSON; null while pending).
    request: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    response: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)


class RunWaitRow(Base):
    """A parked run waiting on a run below it (its delegated run, or its workflow's sub-agent's)
    that is suspended itself (migration 0015): the parked run is handed out once none is left."""

    __tablename__ = "run_waits"
    __table_args__ = (sa.Index("ix_run_waits_child", "child_run_id"),)

    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    child_run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)


class SessionTurnRow(Base):
    """A user's message's run as a turn of its session (migration 0008, double texting): turns
    go in `position` order; one is in flight while its `agent_runs` row exists."""

    __tablename__ = "session_turns"

    position: Mapped[int] = mapped_column(
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    session_id: Mapped[str] = mapped_column(sa.String(200), index=True)
    agent_id: Mapped[str] = mapped_column(sa.String(200))
    run_id: Mapped[str] = mapped_column(sa.String(200), unique=True)
    interrupted: Mapped[bool] = mapped_column(sa.Boolean, server_default=sa.false())


class ExecutorRow(Base):
    __tablename__ = "executors"

    id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    address: Mapped[str] = mapped_column(sa.String(300))
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    tools: Mapped[list[str]] = mapped_column(sa.JSON, default=list)
    model_providers: Mapped[list[dict[str, Any]]] = mapped_column(sa.JSON, default=list)
    # How many runs it takes at once (migration 0012; 0: not said).
    run_slots: Mapped[int] = mapped_column(sa.Integer, server_default="0")


class McpServerRow(Base):
    """A registered MCP server; `project_id` is '' for a global one. Deleted with its project by
    the store (no foreign key: '' names no project)."""

    __tablename__ = "mcp_servers"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "name"),
        sa.Index(None, "created_at", "id"),
        sa.Index(None, "project_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    name: Mapped[str] = mapped_column(sa.String(63))
    transport: Mapped[str] = mapped_column(sa.String(20))
    command: Mapped[str] = mapped_column(sa.Text)
    args: Mapped[list[str]] = mapped_column(sa.JSON)
    url: Mapped[str] = mapped_column(sa.Text)
    env: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    headers: Mapped[dict[str, str]] = mapped_column(sa.JSON)
    request_id: Mapped[str | None] = mapped_column(sa.String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ApiKeyRow(Base):
    """An API key: only the SHA-256 of its secret is stored. Goes with its user, and with the
    project it is scoped to."""

    __tablename__ = "api_keys"
    __table_args__ = (sa.Index(None, "user_id", "created_at", "id"),)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(sa.String(100))
    prefix: Mapped[str] = mapped_column(sa.String(12))
    key_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    project_id: Mapped[str | None] = mapped_column(
        sa.ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class RemoteAgentRow(Base):
    """A remote A2A agent of a project; deleted with its project by the store."""

    __tablename__ = "remote_agents"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "name"),
        sa.Index(None, "project_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    name: Mapped[str] = mapped_column(sa.String(63))
    card_url: Mapped[str] = mapped_column(sa.Text)
    credential: Mapped[str] = mapped_column(sa.Text)
    description: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class UsageEntryRow(Base):
    """The cost ledger (migration 0016): what one run's calls of one model used, as its executor
    reported at the run's end; deleted with its project. An agent's entries outlive it (what
    was spent stays spent), so they name it by id and by its slug at the time."""

    __tablename__ = "usage_entries"
    __table_args__ = (sa.Index(None, "project_id", "day"),)

    agent_id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    model: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.ForeignKey("projects.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(sa.String(200))
    user_id: Mapped[str] = mapped_column(sa.String(200))
    session_id: Mapped[str] = mapped_column(sa.String(200))
    day: Mapped[str] = mapped_column(sa.String(10))
    calls: Mapped[int] = mapped_column(sa.BigInteger)
    input_tokens: Mapped[int] = mapped_column(sa.BigInteger)
    output_tokens: Mapped[int] = mapped_column(sa.BigInteger)
    cached_input_tokens: Mapped[int] = mapped_column(sa.BigInteger)
    cost: Mapped[float] = mapped_column(sa.Float)
    cost_known: Mapped[bool] = mapped_column(sa.Boolean)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WebhookRow(Base):
    """A project's webhook subscription (migration 0022); deleted with its project by the store.
    `events` is comma-separated, so the run bookkeeping statements can match it in plain SQL on
    both dialects. The secret signs deliveries, so it is kept as given (not hashed). A row with a
    `run_id` is an A2A push notification config of that run's task (migration 0023): never listed
    with the project's webhooks; its token and credentials are the A2A client's, kept as given to
    be sent back."""

    __tablename__ = "webhooks"
    __table_args__ = (sa.Index(None, "project_id", "created_at", "id"), sa.Index(None, "run_id"))

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    url: Mapped[str] = mapped_column(sa.Text)
    events: Mapped[str] = mapped_column(sa.Text)
    secret: Mapped[str] = mapped_column(sa.Text)
    description: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    run_id: Mapped[str] = mapped_column(sa.Text, server_default="")
    push_config_id: Mapped[str] = mapped_column(sa.Text, server_default="")
    task_id: Mapped[str] = mapped_column(sa.Text, server_default="")
    token: Mapped[str] = mapped_column(sa.Text, server_default="")
    auth_scheme: Mapped[str] = mapped_column(sa.Text, server_default="")
    auth_credentials: Mapped[str] = mapped_column(sa.Text, server_default="")


class WebhookDeliveryRow(Base):
    """The webhooks' outbox (migration 0022): one row per event and subscription, written in the
    transaction of the change it reports, and then its delivery's progress."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        sa.Index(None, "state", "next_attempt_at"),
        sa.Index(None, "webhook_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(300), primary_key=True)
    webhook_id: Mapped[str] = mapped_column(sa.String(36))
    project_id: Mapped[str] = mapped_column(sa.String(36))
    event: Mapped[str] = mapped_column(sa.String(40))
    agent_id: Mapped[str] = mapped_column(sa.String(36))
    run_id: Mapped[str] = mapped_column(sa.String(200))
    session_id: Mapped[str] = mapped_column(sa.String(200))
    data: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    state: Mapped[str] = mapped_column(sa.String(16))
    attempts: Mapped[int] = mapped_column(sa.Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_status_code: Mapped[int] = mapped_column(sa.Integer)
    last_error: Mapped[str] = mapped_column(sa.Text)


class ScheduleRow(Base):
    """A project's schedule (migration 0021); deleted with its project by the store."""

    __tablename__ = "schedules"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "name"),
        sa.Index(None, "project_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.String(36))
    name: Mapped[str] = mapped_column(sa.String(63))
    agent: Mapped[str] = mapped_column(sa.String(200))
    message: Mapped[str] = mapped_column(sa.Text)
    cron: Mapped[str] = mapped_column(sa.String(200))
    time_zone: Mapped[str] = mapped_column(sa.String(64))
    session_policy: Mapped[str] = mapped_column(sa.String(16))
    missed_policy: Mapped[str] = mapped_column(sa.String(16))
    overlap_policy: Mapped[str] = mapped_column(sa.String(16))
    enabled: Mapped[bool] = mapped_column(sa.Boolean)
    next_fire_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True, index=True)
    session_id: Mapped[str] = mapped_column(sa.String(200))
    created_by: Mapped[str] = mapped_column(sa.String(36))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ScheduleFiringRow(Base):
    """One due time of a schedule and what became of it; unique by (schedule, due time)."""

    __tablename__ = "schedule_firings"
    __table_args__ = (sa.UniqueConstraint("schedule_id", "due_at"),)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    schedule_id: Mapped[str] = mapped_column(sa.String(36))
    due_at: Mapped[datetime] = mapped_column(UtcDateTime)
    outcome: Mapped[str] = mapped_column(sa.String(32), index=True)
    run_id: Mapped[str] = mapped_column(sa.String(200))
    session_id: Mapped[str] = mapped_column(sa.String(200))
    error: Mapped[str] = mapped_column(sa.Text)
    fired_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
