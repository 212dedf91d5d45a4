"""Registry storage: the `RegistryStore` interface and its SQLAlchemy implementation.

The rules (`registry.py`, `auth.py`) open a transaction — `store.read()` or `store.write()` — and
call its methods; everything done inside one `write()` commits together or not at all. ORM rows
never leave this module: methods take and return the domain models of `models.py`.

Uniqueness (e-mail, slugs, agent names per project, request ids) is enforced by database
constraints, so concurrent writers cannot both win; a violation surfaces as the matching
registry error. Write transactions serialize where they must: `get_*(for_update=True)` locks the
row on PostgreSQL, and on SQLite every write transaction begins with `BEGIN IMMEDIATE` (so a
read-then-write transaction never hits SQLite's lock-upgrade deadlock).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agentmesh.registry.errors import AgentNameTaken, EmailTaken, SlugTaken
from agentmesh.registry.models import (
    Agent,
    AgentConfig,
    AgentKind,
    AgentStatus,
    AgentType,
    Credentials,
    Executor,
    LoginState,
    McpServer,
    NewUser,
    PageRequest,
    Project,
    RefreshToken,
    Slice,
    User,
)


class DuplicateRequest(Exception):
    """A create carried a request id that another create already used (a concurrent retry)."""


@dataclass(frozen=True)
class Visibility:
    """Whose agents a caller may see: all (superusers) or those of the projects `user_id` owns."""

    user_id: str
    everything: bool


@dataclass(frozen=True)
class RunChange:
    """An agent after a run bookkeeping statement, and whether that statement changed it; with
    when its project and type last changed (what, with its config, makes its spec's revision)."""

    agent: Agent
    changed: bool
    project_updated_at: datetime
    type_updated_at: datetime


class StoreTransaction(abc.ABC):
    """The operations of one transaction. Reads return None for what does not exist."""

    # Users.
    @abc.abstractmethod
    async def insert_user(
        self, user: NewUser, *, user_id: str, password_hash: str, now: datetime
    ) -> User: ...

    @abc.abstractmethod
    async def get_user(self, user_id: str) -> User | None: ...

    @abc.abstractmethod
    async def get_credentials(self, email: str, *, for_update: bool = False) -> Credentials | None: ...

    @abc.abstractmethod
    async def save_login_state(self, user_id: str, state: LoginState) -> None: ...

    @abc.abstractmethod
    async def set_password_hash(self, user_id: str, password_hash: str) -> None: ...

    @abc.abstractmethod
    async def set_user_flags(self, user_id: str, *, is_superuser: bool, is_active: bool) -> None: ...

    # Refresh tokens.
    @abc.abstractmethod
    async def insert_refresh_token(self, token: RefreshToken) -> None: ...

    @abc.abstractmethod
    async def get_refresh_token(
        self, token_hash: str, *, for_update: bool = False
    ) -> RefreshToken | None: ...

    @abc.abstractmethod
    async def mark_refresh_token_used(self, token_id: str, when: datetime) -> None: ...

    @abc.abstractmethod
    async def revoke_refresh_family(self, family_id: str, when: datetime) -> None: ...

    # Agent types.
    @abc.abstractmethod
    async def insert_agent_type(self, agent_type: AgentType, *, request_id: str | None) -> AgentType: ...

    @abc.abstractmethod
    async def get_agent_type(
        self,
        *,
        type_id: str | None = None,
        slug: str | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> AgentType | None: ...

    @abc.abstractmethod
    async def list_agent_types(self, page: PageRequest) -> Slice[AgentType]: ...

    @abc.abstractmethod
    async def update_agent_type(self, agent_type: AgentType) -> AgentType: ...

    @abc.abstractmethod
    async def delete_agent_type(self, type_id: str) -> None: ...

    @abc.abstractmethod
    async def agent_type_in_use(self, type_id: str) -> bool: ...

    # Projects.
    @abc.abstractmethod
    async def insert_project(self, project: Project, *, request_id: str | None) -> Project: ...

    @abc.abstractmethod
    async def get_project(
        self,
        *,
        project_id: str | None = None,
        slug: str | None = None,
        owner_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Project | None: ...

    @abc.abstractmethod
    async def list_projects(self, owner_id: str | None, page: PageRequest) -> Slice[Project]: ...

    @abc.abstractmethod
    async def update_project(self, project: Project) -> Project: ...

    @abc.abstractmethod
    async def delete_project(self, project_id: str) -> None: ...

    # Agents.
    @abc.abstractmethod
    async def insert_agent(self, agent: Agent, *, request_id: str | None) -> Agent: ...

    @abc.abstractmethod
    async def get_agent(
        self,
        *,
        agent_id: str | None = None,
        project_name: tuple[str, str] | None = None,
        project_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Agent | None: ...

    @abc.abstractmethod
    async def list_agents(self, project_id: str, page: PageRequest) -> Slice[Agent]: ...

    @abc.abstractmethod
    async def agent_names(self, project_id: str) -> list[str]: ...

    @abc.abstractmethod
    async def update_agent(self, agent: Agent) -> Agent: ...

    # Executors.
    @abc.abstractmethod
    async def upsert_executor(self, executor: Executor) -> Executor: ...

    @abc.abstractmethod
    async def list_executors(self, since: datetime) -> list[Executor]: ...


class RegistryStore(abc.ABC):
    """Where the registry keeps its state."""

    @abc.abstractmethod
    def read(self) -> AbstractAsyncContextManager[StoreTransaction]:
        """A transaction that only reads."""

    @abc.abstractmethod
    def write(self) -> AbstractAsyncContextManager[StoreTransaction]:
        """A transaction that commits on success and rolls back on any exception."""

    async def resolve(
        self, project_slug: str, agent_name: str
    ) -> tuple[Project | None, Agent | None, AgentType | None]:
        """The project of that slug, its agent of that name and the agent's type, each None when
        missing (the agent and type also when the project is): what ResolveAgent reads."""
        async with self.read() as tx:
            project = await tx.get_project(slug=project_slug)
            if project is None:
                return None, None, None
            agent = await tx.get_agent(project_name=(project.id, agent_name))
            if agent is None:
                return project, None, None
            return project, agent, await tx.get_agent_type(type_id=agent.agent_type_id)

    @abc.abstractmethod
    async def start_run(
        self, visibility: Visibility, agent_id: str, run_id: str, now: datetime
    ) -> RunChange | None:
        """Records the run as in flight and makes the agent working, atomically, unless the agent
        is paused or terminated or the run already is in flight (a retried start). None when the
        agent does not exist or is not visible."""

    @abc.abstractmethod
    async def finish_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        completed: bool,
        tokens_used: int,
        cost: float,
    ) -> RunChange | None:
        """Forgets the in-flight run and adds its usage, atomically; the agent is idle again when
        it was working and no run is left. Nothing changes when the run was not in flight (a
        retried finish). None when the agent does not exist or is not visible."""


# --- SQLAlchemy implementation -----------------------------------------------------------------


class UtcDateTime(sa.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps them as naive UTC text)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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
    failed_login_count: Mapped[int] = mapped_column(sa.Integer)
    last_failed_login_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    locked_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


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
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AgentRow(Base):
    __tablename__ = "agents"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "name"),
        sa.UniqueConstraint("project_id", "request_id"),
        sa.Index(None, "project_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
    project_id: Mapped[str] = mapped_column(sa.ForeignKey("projects.id", ondelete="CASCADE"))
    agent_type_id: Mapped[str] = mapped_column(
        sa.ForeignKey("agent_types.id", ondelete="RESTRICT"), index=True
    )
    name: Mapped[str] = mapped_column(sa.String(63))
    status: Mapped[str] = mapped_column(sa.String(20))
    config: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    tasks_completed: Mapped[int] = mapped_column(sa.BigInteger)
    tokens_used: Mapped[int] = mapped_column(sa.BigInteger)
    cost: Mapped[float] = mapped_column(sa.Float)
    runs_in_flight: Mapped[int] = mapped_column(sa.Integer)
    request_id: Mapped[str | None] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_activity_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AgentRunRow(Base):
    __tablename__ = "agent_runs"

    agent_id: Mapped[str] = mapped_column(sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ExecutorRow(Base):
    __tablename__ = "executors"

    id: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    address: Mapped[str] = mapped_column(sa.String(300))
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


# --- Run bookkeeping: the hottest path (every run starts and finishes here), so no ORM ----------
#
# On PostgreSQL each of start and finish is one statement, run outside an explicit transaction
# (one round trip): a CTE locks the visible agent row, inserts or deletes the run row, and updates
# the agent only when that changed something; the result is the agent (as changed, or as locked)
# with a flag saying which. Under READ COMMITTED the lock serializes concurrent runs of one agent
# and the UPDATE re-reads the newest row version, so every run is counted once. SQLite has no
# data-modifying CTEs: there the same statements run as two in one `BEGIN IMMEDIATE` transaction
# (in process, no round trips). Text, because the dialects' `ON CONFLICT` constructs are not
# cached compiled and this runs twice per run.

_AGENT_FIELDS = (
    "id",
    "project_id",
    "agent_type_id",
    "name",
    "status",
    "config",
    "tasks_completed",
    "tokens_used",
    "cost",
    "runs_in_flight",
    "created_at",
    "last_activity_at",
)
_AGENT_TYPES: dict[str, Any] = {
    "project_updated_at": UtcDateTime,
    "type_updated_at": UtcDateTime,
    "config": sa.JSON,
    "tasks_completed": sa.BigInteger,
    "tokens_used": sa.BigInteger,
    "cost": sa.Float,
    "runs_in_flight": sa.Integer,
    "created_at": UtcDateTime,
    "last_activity_at": UtcDateTime,
    "changed": sa.Boolean,
}
_BLOCKED = f"('{AgentStatus.PAUSED.value}', '{AgentStatus.TERMINATED.value}')"
_VISIBLE_AGENT = (
    "FROM agents JOIN projects ON projects.id = agents.project_id "
    "JOIN agent_types ON agent_types.id = agents.agent_type_id "
    "WHERE agents.id = :agent_id AND (:everything OR projects.owner_id = :user_id)"
)
# When the agent's project and type last changed: with its config, they make its spec's revision.
_SPEC_TIMES = "projects.updated_at AS project_updated_at, agent_types.updated_at AS type_updated_at"
_SPEC_TIME_FIELDS = "target.project_updated_at, target.type_updated_at"
_START_SET = (
    f"status = '{AgentStatus.WORKING.value}', runs_in_flight = agents.runs_in_flight + 1, "
    "last_activity_at = :now"
)
_FINISH_SET = (
    f"status = CASE WHEN agents.status = '{AgentStatus.WORKING.value}' AND agents.runs_in_flight <= 1 "
    f"THEN '{AgentStatus.IDLE.value}' ELSE agents.status END, "
    "runs_in_flight = {greatest}(agents.runs_in_flight - 1, 0), "
    "tasks_completed = agents.tasks_completed + :completed, "
    "tokens_used = agents.tokens_used + :tokens_used, cost = agents.cost + :cost, last_activity_at = :now"
)


def _columns(prefix: str) -> str:
    return ", ".join(f"{prefix}{field}" for field in _AGENT_FIELDS)


def _run_statement(sql: str, *, result: bool = True, **types: Any) -> sa.TextClause:
    params = {
        "agent_id": sa.String,
        "run_id": sa.String,
        "user_id": sa.String,
        "everything": sa.Boolean,
        "now": UtcDateTime,
        **types,
    }
    statement = sa.text(sql).bindparams(
        *(sa.bindparam(name, type_=kind) for name, kind in params.items() if f":{name}" in sql)
    )
    if not result:
        return statement
    return statement.columns(  # type: ignore[return-value]
        *(
            sa.column(field, _AGENT_TYPES.get(field, sa.String))
            for field in (*_AGENT_FIELDS, "changed", "project_updated_at", "type_updated_at")
        )
    )


def _pg_run(modify: str, set_clause: str, **types: Any) -> sa.TextClause:
    return _run_statement(
        f"WITH target AS (SELECT {_columns('agents.')}, {_SPEC_TIMES} {_VISIBLE_AGENT} "
        "FOR UPDATE OF agents), "
        f"run AS ({modify} RETURNING agent_runs.agent_id), "
        f"changed AS (UPDATE agents SET {set_clause} FROM run WHERE agents.id = run.agent_id "
        f"RETURNING {_columns('agents.')}) "
        f"SELECT {_columns('changed.')}, true AS changed, {_SPEC_TIME_FIELDS} FROM changed, target "
        f"UNION ALL SELECT {_columns('target.')}, false AS changed, {_SPEC_TIME_FIELDS} FROM target "
        "WHERE NOT EXISTS (SELECT FROM changed)",
        **types,
    )


_USAGE_TYPES: dict[str, Any] = {"completed": sa.Integer, "tokens_used": sa.BigInteger, "cost": sa.Float}

_PG_START_RUN = _pg_run(
    "INSERT INTO agent_runs (agent_id, run_id, started_at) "
    f"SELECT id, :run_id, :now FROM target WHERE status NOT IN {_BLOCKED} ON CONFLICT DO NOTHING",
    _START_SET,
)
_PG_FINISH_RUN = _pg_run(
    "DELETE FROM agent_runs USING target "
    "WHERE agent_runs.agent_id = target.id AND agent_runs.run_id = :run_id",
    _FINISH_SET.format(greatest="GREATEST"),
    **_USAGE_TYPES,
)
_SQLITE_ADD_RUN = _run_statement(
    "INSERT INTO agent_runs (agent_id, run_id, started_at) "
    f"SELECT agents.id, :run_id, :now {_VISIBLE_AGENT} AND agents.status NOT IN {_BLOCKED} "
    "ON CONFLICT DO NOTHING",
    result=False,
)
_SQLITE_REMOVE_RUN = _run_statement(
    "DELETE FROM agent_runs WHERE agent_runs.agent_id = :agent_id AND agent_runs.run_id = :run_id "
    f"AND EXISTS (SELECT 1 {_VISIBLE_AGENT})",
    result=False,
)
_SQLITE_START_UPDATE = _run_statement(f"UPDATE agents SET {_START_SET} WHERE id = :agent_id", result=False)
_SQLITE_FINISH_UPDATE = _run_statement(
    f"UPDATE agents SET {_FINISH_SET.format(greatest='MAX')} WHERE id = :agent_id",
    result=False,
    **_USAGE_TYPES,
)
_SQLITE_VISIBLE_AGENT = _run_statement(
    f"SELECT {_columns('agents.')}, :changed AS changed, {_SPEC_TIMES} {_VISIBLE_AGENT}",
    changed=sa.Boolean,
)


def _run_change(row: sa.Row[Any] | None) -> RunChange | None:
    if row is None:
        return None
    values = row._mapping
    agent = Agent(
        id=values["id"],
        name=values["name"],
        project_id=values["project_id"],
        agent_type_id=values["agent_type_id"],
        status=AgentStatus(values["status"]),
        config=AgentConfig(**values["config"]),
        tasks_completed=values["tasks_completed"],
        tokens_used=values["tokens_used"],
        cost=values["cost"],
        runs_in_flight=values["runs_in_flight"],
        created_at=values["created_at"],
        last_activity_at=values["last_activity_at"],
    )
    return RunChange(
        agent=agent,
        changed=bool(values["changed"]),
        project_updated_at=values["project_updated_at"],
        type_updated_at=values["type_updated_at"],
    )


# --- ResolveAgent: once per run, so one text statement outside a transaction -------------------
#
# Project, agent and type in one round trip (and one snapshot): the project by slug, LEFT JOINed
# to its agent of that name and that agent's type, so a missing agent still returns the project
# (the caller tells "project not found" from "agent not found").

_PROJECT_FIELDS = ("id", "name", "slug", "description", "owner_id", "created_at", "updated_at")
_TYPE_FIELDS = (
    "id",
    "name",
    "slug",
    "description",
    "expertise",
    "personality_prompt",
    "primary_model",
    "fallback_models",
    "model_params",
    "tools",
    "mcp_servers",
    "kind",
    "sub_agents",
    "max_steps",
    "max_iterations",
    "is_active",
    "created_at",
    "updated_at",
)


def _resolve_columns() -> list[sa.ColumnClause[Any]]:
    def typed(table: type[Base], field: str) -> Any:
        return table.__table__.c[field].type

    return [
        *(sa.column(f"p_{field}", typed(ProjectRow, field)) for field in _PROJECT_FIELDS),
        *(sa.column(f"a_{field}", typed(AgentRow, field)) for field in _AGENT_FIELDS),
        *(sa.column(f"t_{field}", typed(AgentTypeRow, field)) for field in _TYPE_FIELDS),
    ]


_RESOLVE = (
    sa.text(
        f"SELECT {', '.join(f'projects.{field} AS p_{field}' for field in _PROJECT_FIELDS)}, "
        f"{', '.join(f'agents.{field} AS a_{field}' for field in _AGENT_FIELDS)}, "
        f"{', '.join(f'agent_types.{field} AS t_{field}' for field in _TYPE_FIELDS)} "
        "FROM projects "
        "LEFT JOIN agents ON agents.project_id = projects.id AND agents.name = :agent_name "
        "LEFT JOIN agent_types ON agent_types.id = agents.agent_type_id "
        "WHERE projects.slug = :project_slug"
    )
    .bindparams(sa.bindparam("project_slug", type_=sa.String), sa.bindparam("agent_name", type_=sa.String))
    .columns(*_resolve_columns())
)


def _resolved(row: sa.Row[Any] | None) -> tuple[Project | None, Agent | None, AgentType | None]:
    if row is None:
        return None, None, None
    values = row._mapping
    project = Project(**{field: values[f"p_{field}"] for field in _PROJECT_FIELDS})
    if values["a_id"] is None:
        return project, None, None
    agent = Agent(
        **{field: values[f"a_{field}"] for field in _AGENT_FIELDS if field not in ("status", "config")},
        status=AgentStatus(values["a_status"]),
        config=AgentConfig(**values["a_config"]),
    )
    if values["t_id"] is None:
        return project, agent, None
    agent_type = AgentType(
        id=values["t_id"],
        name=values["t_name"],
        slug=values["t_slug"],
        description=values["t_description"],
        expertise=list(values["t_expertise"]),
        personality_prompt=values["t_personality_prompt"],
        primary_model=values["t_primary_model"],
        fallback_models=list(values["t_fallback_models"]),
        model_params=dict(values["t_model_params"]),
        tools=list(values["t_tools"]),
        mcp_servers=[McpServer(**server) for server in values["t_mcp_servers"]],
        kind=AgentKind(values["t_kind"]),
        sub_agents=list(values["t_sub_agents"]),
        max_steps=values["t_max_steps"],
        max_iterations=values["t_max_iterations"],
        is_active=values["t_is_active"],
        created_at=values["t_created_at"],
        updated_at=values["t_updated_at"],
    )
    return project, agent, agent_type


_SQLITE_BEGIN = "agentmesh_sqlite_begin"


class SqlRegistryStore(RegistryStore):
    """RegistryStore on an async SQLAlchemy engine (SQLite through aiosqlite, or PostgreSQL)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._write_engine = engine
        # Single statements need no transaction around them: no BEGIN/COMMIT round trips.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._sqlite = engine.dialect.name == "sqlite"
        if self._sqlite:
            _take_over_sqlite_transactions(engine)
            self._write_engine = engine.execution_options(**{_SQLITE_BEGIN: "BEGIN IMMEDIATE"})

    def read(self) -> AbstractAsyncContextManager[StoreTransaction]:
        return self._transaction(self._engine)

    async def resolve(
        self, project_slug: str, agent_name: str
    ) -> tuple[Project | None, Agent | None, AgentType | None]:
        params = {"project_slug": project_slug, "agent_name": agent_name}
        # SQLite: the store's own BEGIN (in process, no round trip); PostgreSQL: no transaction.
        engine = self._engine if self._sqlite else self._autocommit
        async with engine.connect() as connection:
            return _resolved((await connection.execute(_RESOLVE, params)).first())

    async def start_run(
        self, visibility: Visibility, agent_id: str, run_id: str, now: datetime
    ) -> RunChange | None:
        params = _run_parameters(visibility, agent_id, run_id, now)
        if self._sqlite:
            return await self._sqlite_run(_SQLITE_ADD_RUN, _SQLITE_START_UPDATE, params)
        async with self._autocommit.connect() as connection:
            return _run_change((await connection.execute(_PG_START_RUN, params)).first())

    async def finish_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        completed: bool,
        tokens_used: int,
        cost: float,
    ) -> RunChange | None:
        params = _run_parameters(visibility, agent_id, run_id, now)
        params.update(completed=int(completed), tokens_used=tokens_used, cost=cost)
        if self._sqlite:
            return await self._sqlite_run(_SQLITE_REMOVE_RUN, _SQLITE_FINISH_UPDATE, params)
        async with self._autocommit.connect() as connection:
            return _run_change((await connection.execute(_PG_FINISH_RUN, params)).first())

    async def _sqlite_run(
        self, modify: sa.TextClause, update: sa.TextClause, params: dict[str, Any]
    ) -> RunChange | None:
        async with self._write_engine.begin() as connection:
            changed = (await connection.execute(modify, params)).rowcount == 1
            if changed:
                await connection.execute(update, params)
            result = await connection.execute(_SQLITE_VISIBLE_AGENT, {**params, "changed": changed})
            return _run_change(result.first())

    def write(self) -> AbstractAsyncContextManager[StoreTransaction]:
        return self._transaction(self._write_engine)

    @asynccontextmanager
    async def _transaction(self, engine: AsyncEngine) -> AsyncIterator[StoreTransaction]:
        async with AsyncSession(engine, expire_on_commit=False, autoflush=False) as session, session.begin():
            yield SqlStoreTransaction(session)


def _take_over_sqlite_transactions(engine: AsyncEngine) -> None:
    """Lets the store choose how SQLite transactions begin (the driver would always BEGIN
    DEFERRED, lazily). The documented SQLAlchemy recipe for pysqlite/aiosqlite."""

    @event.listens_for(engine.sync_engine, "connect")
    def _no_driver_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql(connection.get_execution_options().get(_SQLITE_BEGIN, "BEGIN"))


class SqlStoreTransaction(StoreTransaction):
    """One AsyncSession transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    # Users.

    async def insert_user(self, user: NewUser, *, user_id: str, password_hash: str, now: datetime) -> User:
        row = UserRow(
            id=user_id,
            email=user.email,
            password_hash=password_hash,
            first_name=user.first_name,
            last_name=user.last_name,
            is_superuser=user.is_superuser,
            is_active=True,
            failed_login_count=0,
            created_at=now,
        )
        await self._insert(row, {"email": EmailTaken(f"e-mail {user.email!r} is already registered")})
        return _user(row)

    async def get_user(self, user_id: str) -> User | None:
        row = await self._session.get(UserRow, user_id)
        return _user(row) if row else None

    async def get_credentials(self, email: str, *, for_update: bool = False) -> Credentials | None:
        row = await self._one(sa.select(UserRow).where(UserRow.email == email), for_update)
        if row is None:
            return None
        state = LoginState(
            failed_count=row.failed_login_count,
            last_failed_at=row.last_failed_login_at,
            locked_until=row.locked_until,
        )
        return Credentials(user=_user(row), password_hash=row.password_hash, login=state)

    async def save_login_state(self, user_id: str, state: LoginState) -> None:
        await self._session.execute(
            sa.update(UserRow)
            .where(UserRow.id == user_id)
            .values(
                failed_login_count=state.failed_count,
                last_failed_login_at=state.last_failed_at,
                locked_until=state.locked_until,
            )
        )

    async def set_password_hash(self, user_id: str, password_hash: str) -> None:
        await self._session.execute(
            sa.update(UserRow).where(UserRow.id == user_id).values(password_hash=password_hash)
        )

    async def set_user_flags(self, user_id: str, *, is_superuser: bool, is_active: bool) -> None:
        await self._session.execute(
            sa.update(UserRow)
            .where(UserRow.id == user_id)
            .values(is_superuser=is_superuser, is_active=is_active)
        )

    # Refresh tokens.

    async def insert_refresh_token(self, token: RefreshToken) -> None:
        self._session.add(RefreshTokenRow(**token.model_dump()))
        await self._session.flush()

    async def get_refresh_token(self, token_hash: str, *, for_update: bool = False) -> RefreshToken | None:
        statement = sa.select(RefreshTokenRow).where(RefreshTokenRow.token_hash == token_hash)
        row = await self._one(statement, for_update)
        return _refresh_token(row) if row else None

    async def mark_refresh_token_used(self, token_id: str, when: datetime) -> None:
        await self._session.execute(
            sa.update(RefreshTokenRow).where(RefreshTokenRow.id == token_id).values(used_at=when)
        )

    async def revoke_refresh_family(self, family_id: str, when: datetime) -> None:
        await self._session.execute(
            sa.update(RefreshTokenRow)
            .where(RefreshTokenRow.family_id == family_id, RefreshTokenRow.revoked_at.is_(None))
            .values(revoked_at=when)
        )

    # Agent types.

    async def insert_agent_type(self, agent_type: AgentType, *, request_id: str | None) -> AgentType:
        row = AgentTypeRow(**_agent_type_values(agent_type), request_id=request_id)
        await self._insert(
            row,
            {
                "slug": SlugTaken(f"agent type slug {agent_type.slug!r} is taken"),
                "request_id": DuplicateRequest(),
            },
        )
        return _agent_type(row)

    async def get_agent_type(
        self,
        *,
        type_id: str | None = None,
        slug: str | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> AgentType | None:
        statement = sa.select(AgentTypeRow)
        if type_id is not None:
            statement = statement.where(AgentTypeRow.id == type_id)
        if slug is not None:
            statement = statement.where(AgentTypeRow.slug == slug)
        if request_id is not None:
            statement = statement.where(AgentTypeRow.request_id == request_id)
        row = await self._one(statement, for_update)
        return _agent_type(row) if row else None

    async def list_agent_types(self, page: PageRequest) -> Slice[AgentType]:
        return await self._slice(AgentTypeRow, [], page, _agent_type)

    async def update_agent_type(self, agent_type: AgentType) -> AgentType:
        values = _agent_type_values(agent_type)
        await self._update(
            AgentTypeRow,
            agent_type.id,
            values,
            {"slug": SlugTaken(f"agent type slug {agent_type.slug!r} is taken")},
        )
        return agent_type

    async def delete_agent_type(self, type_id: str) -> None:
        await self._session.execute(sa.delete(AgentTypeRow).where(AgentTypeRow.id == type_id))

    async def agent_type_in_use(self, type_id: str) -> bool:
        statement = sa.select(sa.literal(1)).where(AgentRow.agent_type_id == type_id).limit(1)
        return (await self._session.execute(statement)).first() is not None

    # Projects.

    async def insert_project(self, project: Project, *, request_id: str | None) -> Project:
        row = ProjectRow(**project.model_dump(), request_id=request_id)
        await self._insert(
            row,
            {
                "slug": SlugTaken(f"project slug {project.slug!r} is taken"),
                "request_id": DuplicateRequest(),
            },
        )
        return _project(row)

    async def get_project(
        self,
        *,
        project_id: str | None = None,
        slug: str | None = None,
        owner_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Project | None:
        statement = sa.select(ProjectRow)
        if project_id is not None:
            statement = statement.where(ProjectRow.id == project_id)
        if slug is not None:
            statement = statement.where(ProjectRow.slug == slug)
        if owner_request is not None:
            statement = statement.where(
                ProjectRow.owner_id == owner_request[0], ProjectRow.request_id == owner_request[1]
            )
        row = await self._one(statement, for_update)
        return _project(row) if row else None

    async def list_projects(self, owner_id: str | None, page: PageRequest) -> Slice[Project]:
        conditions = [] if owner_id is None else [ProjectRow.owner_id == owner_id]
        return await self._slice(ProjectRow, conditions, page, _project)

    async def update_project(self, project: Project) -> Project:
        values = project.model_dump(include={"name", "slug", "description", "updated_at"})
        await self._update(
            ProjectRow, project.id, values, {"slug": SlugTaken(f"project slug {project.slug!r} is taken")}
        )
        return project

    async def delete_project(self, project_id: str) -> None:
        # Explicit children first: no reliance on ON DELETE CASCADE being enabled.
        agents = sa.select(AgentRow.id).where(AgentRow.project_id == project_id)
        await self._session.execute(sa.delete(AgentRunRow).where(AgentRunRow.agent_id.in_(agents)))
        await self._session.execute(sa.delete(AgentRow).where(AgentRow.project_id == project_id))
        await self._session.execute(sa.delete(ProjectRow).where(ProjectRow.id == project_id))

    # Agents.

    async def insert_agent(self, agent: Agent, *, request_id: str | None) -> Agent:
        row = AgentRow(**_agent_values(agent), request_id=request_id)
        await self._insert(
            row,
            {
                "name": AgentNameTaken(f"an agent named {agent.name!r} exists in this project"),
                "request_id": DuplicateRequest(),
            },
        )
        return _agent(row)

    async def get_agent(
        self,
        *,
        agent_id: str | None = None,
        project_name: tuple[str, str] | None = None,
        project_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Agent | None:
        statement = sa.select(AgentRow)
        if agent_id is not None:
            statement = statement.where(AgentRow.id == agent_id)
        if project_name is not None:
            statement = statement.where(
                AgentRow.project_id == project_name[0], AgentRow.name == project_name[1]
            )
        if project_request is not None:
            statement = statement.where(
                AgentRow.project_id == project_request[0], AgentRow.request_id == project_request[1]
            )
        row = await self._one(statement, for_update)
        return _agent(row) if row else None

    async def list_agents(self, project_id: str, page: PageRequest) -> Slice[Agent]:
        return await self._slice(AgentRow, [AgentRow.project_id == project_id], page, _agent)

    async def agent_names(self, project_id: str) -> list[str]:
        result = await self._session.execute(
            sa.select(AgentRow.name).where(AgentRow.project_id == project_id)
        )
        return list(result.scalars())

    async def update_agent(self, agent: Agent) -> Agent:
        await self._update(AgentRow, agent.id, _agent_values(agent), {})
        return agent

    # Executors.

    async def upsert_executor(self, executor: Executor) -> Executor:
        insert = _insert_for(self._session)(ExecutorRow).values(**executor.model_dump())
        await self._session.execute(
            insert.on_conflict_do_update(
                index_elements=[ExecutorRow.id],
                set_={"address": insert.excluded.address, "heartbeat_at": insert.excluded.heartbeat_at},
            )
        )
        return executor

    async def list_executors(self, since: datetime) -> list[Executor]:
        result = await self._session.execute(
            sa.select(ExecutorRow).where(ExecutorRow.heartbeat_at >= since).order_by(ExecutorRow.id)
        )
        return [Executor(id=r.id, address=r.address, heartbeat_at=r.heartbeat_at) for r in result.scalars()]

    # Helpers.

    async def _one(self, statement: sa.Select[Any], for_update: bool) -> Any:
        if for_update:
            statement = statement.with_for_update()
        return (await self._session.execute(statement)).scalars().first()

    async def _insert(self, row: Base, duplicates: dict[str, Exception]) -> None:
        """Adds a row; a unique violation raises the error given for the violated column (the
        transaction is then aborted and rolls back)."""
        self._session.add(row)
        try:
            await self._session.flush()
        except IntegrityError as error:
            raise _duplicate(error, row.__table__, duplicates) from None  # type: ignore[attr-defined]

    async def _update(
        self, model: Any, row_id: str, values: dict[str, Any], duplicates: dict[str, Exception]
    ) -> None:
        try:
            await self._session.execute(sa.update(model).where(model.id == row_id).values(**values))
        except IntegrityError as error:
            raise _duplicate(error, model.__table__, duplicates) from None

    async def _slice(
        self, model: Any, conditions: Sequence[sa.ColumnElement[bool]], page: PageRequest, convert: Any
    ) -> Slice[Any]:
        total = await self._session.scalar(sa.select(sa.func.count()).select_from(model).where(*conditions))
        statement = sa.select(model).where(*conditions)
        if page.after is not None:
            created_at, last_id = page.after
            statement = statement.where(
                sa.or_(
                    model.created_at > created_at,
                    sa.and_(model.created_at == created_at, model.id > last_id),
                )
            )
        statement = statement.order_by(model.created_at, model.id).limit(page.size + 1)
        if page.offset:
            statement = statement.offset(page.offset)
        rows = list((await self._session.execute(statement)).scalars())
        return Slice(
            items=[convert(row) for row in rows[: page.size]], has_more=len(rows) > page.size, total=total
        )


def _run_parameters(visibility: Visibility, agent_id: str, run_id: str, now: datetime) -> dict[str, Any]:
    return {
        "agent_id": agent_id,
        "run_id": run_id,
        "now": now,
        "user_id": visibility.user_id,
        "everything": visibility.everything,
    }


def _insert_for(session: AsyncSession) -> Any:
    return postgresql.insert if session.bind.dialect.name == "postgresql" else sqlite.insert


def _duplicate(error: IntegrityError, table: sa.Table, duplicates: dict[str, Exception]) -> Exception:
    """The error for the unique constraint an IntegrityError reports, recognized by constraint
    name (PostgreSQL) or by the column list in the message (SQLite); the last column of the
    constraint picks the error."""
    text = str(error.orig)
    for constraint in table.constraints:
        if not isinstance(constraint, sa.UniqueConstraint):
            continue
        columns = [column.name for column in constraint.columns]
        sqlite_text = "UNIQUE constraint failed: " + ", ".join(f"{table.name}.{c}" for c in columns)
        if (f'"{constraint.name}"' in text or sqlite_text in text) and columns[-1] in duplicates:
            return duplicates[columns[-1]]
    return error


def _user(row: UserRow) -> User:
    return User(
        id=row.id,
        email=row.email,
        first_name=row.first_name,
        last_name=row.last_name,
        is_superuser=row.is_superuser,
        is_active=row.is_active,
        created_at=row.created_at,
    )


def _refresh_token(row: RefreshTokenRow) -> RefreshToken:
    return RefreshToken(
        id=row.id,
        user_id=row.user_id,
        family_id=row.family_id,
        token_hash=row.token_hash,
        created_at=row.created_at,
        expires_at=row.expires_at,
        used_at=row.used_at,
        revoked_at=row.revoked_at,
    )


def _agent_type_values(agent_type: AgentType) -> dict[str, Any]:
    values = agent_type.model_dump(mode="json", exclude={"created_at", "updated_at"})
    values["created_at"] = agent_type.created_at
    values["updated_at"] = agent_type.updated_at
    return values


def _agent_type(row: AgentTypeRow) -> AgentType:
    return AgentType(
        id=row.id,
        name=row.name,
        slug=row.slug,
        description=row.description,
        expertise=list(row.expertise),
        personality_prompt=row.personality_prompt,
        primary_model=row.primary_model,
        fallback_models=list(row.fallback_models),
        model_params=dict(row.model_params),
        tools=list(row.tools),
        mcp_servers=[McpServer(**server) for server in row.mcp_servers],
        kind=AgentKind(row.kind),
        sub_agents=list(row.sub_agents),
        max_steps=row.max_steps,
        max_iterations=row.max_iterations,
        is_active=row.is_active,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _project(row: ProjectRow) -> Project:
    return Project(
        id=row.id,
        name=row.name,
        slug=row.slug,
        description=row.description,
        owner_id=row.owner_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _agent_values(agent: Agent) -> dict[str, Any]:
    values = agent.model_dump(exclude={"config"})
    values["status"] = agent.status.value
    values["config"] = agent.config.model_dump(mode="json", exclude_none=True)
    return values


def _agent(row: AgentRow) -> Agent:
    return Agent(
        id=row.id,
        name=row.name,
        project_id=row.project_id,
        agent_type_id=row.agent_type_id,
        status=AgentStatus(row.status),
        config=AgentConfig(**row.config),
        tasks_completed=row.tasks_completed,
        tokens_used=row.tokens_used,
        cost=row.cost,
        runs_in_flight=row.runs_in_flight,
        created_at=row.created_at,
        last_activity_at=row.last_activity_at,
    )
