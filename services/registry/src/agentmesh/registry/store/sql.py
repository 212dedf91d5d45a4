"""The registry store on an async SQLAlchemy engine: SQLite through aiosqlite, or PostgreSQL.

Uniqueness is enforced by database constraints, so concurrent writers cannot both win; a
violation surfaces as the matching registry error. Write transactions serialize where they must:
`get_*(for_update=True)` locks the row on PostgreSQL, and on SQLite every write transaction begins
with `BEGIN IMMEDIATE` (so a read-then-write transaction never hits SQLite's lock-upgrade
deadlock). Lists page by keyset on (`created_at`, `id`), also for REST page numbers (see
`_slice`). ORM rows never leave the store (this package and the resources' `store` parts).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from agentmesh.registry.agents.store import SqlAgents
from agentmesh.registry.agents.version_store import SqlAgentVersions
from agentmesh.registry.identity.sign_in_store import SqlSignIn
from agentmesh.registry.identity.store import SqlAccounts, SqlApiKeys
from agentmesh.registry.mappers import from_row
from agentmesh.registry.mcp_servers.store import SqlMcpServers
from agentmesh.registry.models import (
    Agent,
    AgentType,
    PageRequest,
    Project,
    Slice,
)
from agentmesh.registry.projects.store import SqlProjects
from agentmesh.registry.remote_agents.store import SqlRemoteAgents
from agentmesh.registry.runs.executor_store import SqlExecutors
from agentmesh.registry.runs.input_store import SqlInputRequestStore
from agentmesh.registry.runs.lease_store import SqlRunLeaseStore
from agentmesh.registry.schedules.store import SqlSchedules
from agentmesh.registry.store.interface import (
    InputRequestStore,
    RegistryStore,
    RunChange,
    RunLease,
    RunLeaseStore,
    StoreTransaction,
    Visibility,
)
from agentmesh.registry.store.statements import (
    PG_FINISH_RUN,
    PG_START_RUN,
    RESOLVE,
    RUN_OUTBOX,
    SQLITE_ADD_RUN,
    SQLITE_FINISH_UPDATE,
    SQLITE_REMOVE_RUN,
    SQLITE_RUN_SESSION,
    SQLITE_START_UPDATE,
    SQLITE_VISIBLE_AGENT,
    resolved,
    run_change,
)
from agentmesh.registry.tables import (
    Base,
)
from agentmesh.registry.usage.store import SqlUsageLedgerStore, UsageLedgerStore
from agentmesh.registry.webhooks.models import RunOutcome
from agentmesh.registry.webhooks.outbox_store import SqlWebhookOutboxStore, WebhookOutboxStore
from agentmesh.registry.webhooks.store import SqlWebhooks

_SQLITE_BEGIN = "agentmesh_sqlite_begin"


class SqlRegistryStore(RegistryStore):
    """RegistryStore on an async SQLAlchemy engine (SQLite through aiosqlite, or PostgreSQL)."""

    def __init__(self, engine: AsyncEngine, *, lease_engine: AsyncEngine | None = None) -> None:
        """`lease_engine`: a small pool of its own for lease renewals and sweeps (PostgreSQL;
        runs/lease_store.py); SQLite's writes are serialized anyway and share the one engine."""
        self._engine = engine
        self._write_engine = engine
        # Single statements need no transaction around them: no BEGIN/COMMIT round trips.
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._sqlite = engine.dialect.name == "sqlite"
        if self._sqlite:
            _take_over_sqlite_transactions(engine)
            self._write_engine = engine.execution_options(**{_SQLITE_BEGIN: "BEGIN IMMEDIATE"})
        self._leases = SqlRunLeaseStore(
            self._write_engine, lease_engine=None if self._sqlite else lease_engine
        )
        self._input_requests = SqlInputRequestStore(engine, write_engine=self._write_engine)
        self._usage = SqlUsageLedgerStore(engine, write_engine=self._write_engine)
        self._webhook_outbox = SqlWebhookOutboxStore(engine, write_engine=self._write_engine)

    @property
    def leases(self) -> RunLeaseStore:
        return self._leases

    @property
    def input_requests(self) -> InputRequestStore:
        return self._input_requests

    @property
    def usage(self) -> UsageLedgerStore:
        return self._usage

    @property
    def webhook_outbox(self) -> WebhookOutboxStore:
        return self._webhook_outbox

    def read(self) -> AbstractAsyncContextManager[StoreTransaction]:
        return self._transaction(self._engine)

    async def resolve(
        self, project_slug: str, agent_name: str
    ) -> tuple[Project | None, Agent | None, AgentType | None]:
        params = {"project_slug": project_slug, "agent_name": agent_name}
        # SQLite: the store's own BEGIN (in process, no round trip); PostgreSQL: no transaction.
        engine = self._engine if self._sqlite else self._autocommit
        async with engine.connect() as connection:
            return resolved((await connection.execute(RESOLVE, params)).first())

    async def start_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        lease: RunLease | None = None,
    ) -> RunChange | None:
        params = _run_parameters(visibility, agent_id, run_id, now)
        params.update(
            session_id=lease.session_id if lease else "",
            executor_id=lease.executor_id if lease else "",
            lease_expires_at=lease.expires_at if lease else None,
        )
        if self._sqlite:
            params.update(event="run.started", data="")
            return await self._sqlite_run(SQLITE_ADD_RUN, SQLITE_START_UPDATE, params)
        asked = time.monotonic()
        async with self._autocommit.connect() as connection:
            _extend_lease(params, time.monotonic() - asked)
            return run_change((await connection.execute(PG_START_RUN, params)).first())

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
        cancelled: bool = False,
    ) -> RunChange | None:
        params = _run_parameters(visibility, agent_id, run_id, now)
        outcome = RunOutcome.of(completed=completed, cancelled=cancelled)
        params.update(completed=int(completed), tokens_used=tokens_used, cost=cost, data=outcome.data)
        if self._sqlite:
            params["event"] = outcome.event.value
            return await self._sqlite_run(SQLITE_REMOVE_RUN, SQLITE_FINISH_UPDATE, params, ended=True)
        async with self._autocommit.connect() as connection:
            return run_change((await connection.execute(PG_FINISH_RUN, params)).first())

    async def _sqlite_run(
        self, modify: sa.TextClause, update: sa.TextClause, params: dict[str, Any], *, ended: bool = False
    ) -> RunChange | None:
        asked = time.monotonic()
        async with self._write_engine.begin() as connection:
            _extend_lease(params, time.monotonic() - asked)
            if ended:
                params["session_id"] = (await connection.execute(SQLITE_RUN_SESSION, params)).scalar() or ""
            changed = (await connection.execute(modify, params)).rowcount == 1
            if changed:
                await connection.execute(update, params)
                await connection.execute(RUN_OUTBOX, params)
            result = await connection.execute(SQLITE_VISIBLE_AGENT, {**params, "changed": changed})
            return run_change(result.first())

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


class SqlStoreTransaction(
    SqlAccounts,
    SqlAgents,
    SqlAgentVersions,
    SqlProjects,
    SqlMcpServers,
    SqlApiKeys,
    SqlRemoteAgents,
    SqlSchedules,
    SqlExecutors,
    SqlSignIn,
    SqlWebhooks,
    StoreTransaction,
):
    """One AsyncSession transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

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
        self, row_type: Any, conditions: Sequence[sa.ColumnElement[bool]], page: PageRequest, model: Any
    ) -> Slice[Any]:
        """One page in (`created_at`, `id`) order, after `page.after` or after the `page.skip`
        items before it, with the total. Never OFFSET: a page number is turned into its keyset
        boundary first (`_boundary`), so the page itself is read by the same indexed keyset query."""
        key = (row_type.created_at, row_type.id)
        count = sa.select(sa.func.count()).select_from(row_type).where(*conditions)
        total = await self._session.scalar(count)
        after = page.after
        if after is None and page.skip:
            after = await self._boundary(key, conditions, page.skip)
        statement = sa.select(row_type).where(*conditions)
        if after is not None:
            statement = statement.where(sa.tuple_(*key) > sa.tuple_(*_typed(key, after)))
        statement = statement.order_by(*key).limit(page.size + 1)
        rows = list((await self._session.execute(statement)).scalars())
        items = [from_row(model, row) for row in rows[: page.size]]
        return Slice(items=items, has_more=len(rows) > page.size, total=total)

    async def _boundary(
        self, key: tuple[Any, Any], conditions: Sequence[sa.ColumnElement[bool]], skip: int
    ) -> tuple[datetime, str] | None:
        """The sort key of the `skip`-th item: the last of the first `skip` keys. One query that
        walks the list's (scope, created_at, id) index and stops after `skip` entries, reading no
        row; None for an empty list. Past the end it is the last item's key (an empty page)."""
        head = sa.select(*key).where(*conditions).order_by(*key).limit(skip).subquery()
        statement = sa.select(*head.c).order_by(*(column.desc() for column in head.c)).limit(1)
        found = (await self._session.execute(statement)).first()
        return None if found is None else (found[0], found[1])


def _typed(key: tuple[Any, Any], values: tuple[datetime, str]) -> list[Any]:
    # Literals carry their column's type, so the UTC conversion applies to the cursor's time too.
    return [sa.literal(value, column.type) for value, column in zip(values, key, strict=True)]


def _run_parameters(visibility: Visibility, agent_id: str, run_id: str, now: datetime) -> dict[str, Any]:
    return {
        "agent_id": agent_id,
        "run_id": run_id,
        "now": now,
        "user_id": visibility.user_id,
        "everything": visibility.everything,
    }


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


def _extend_lease(params: dict[str, Any], waited_seconds: float) -> None:
    """A run's lease counts from its start's write, not from the request: the time spent waiting
    for a connection (seconds, under a burst of starts) would otherwise expire it at birth."""
    if params.get("lease_expires_at") is not None:
        params["lease_expires_at"] += timedelta(seconds=waited_seconds)
