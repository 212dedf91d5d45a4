"""Group commit of PostgreSQL appends: the one-statement appends of different sessions
that arrive while a statement is in flight are written by the next statement together, one round
trip and one commit for the group instead of one per append.

Nothing waits for a group to fill: an append that finds no statement in flight goes at once, alone
(the same statement as without grouping), so a lone writer's latency does not change. What queues
meanwhile goes next, as one group: at most one append per session (a session's appends take its
row's lock in turn, and one statement cannot bump a row twice), up to `max_requests` appends and
`max_events` events; the rest waits for the group after.

Each append in a group keeps its own answer. The group statement (GROUPED_APPEND) bumps every
session it may and returns a row per session it bumped: an append whose session is not among them
was refused by its own checks (another project's or a deleted project's session, a stale expected
last seq) and wrote nothing, exactly as it would have alone; the store then says why. A failure of
the statement as a whole — an idempotency key that a concurrent append stored first violates the
unique index, and the whole statement rolls back — writes nothing for anyone: the group's appends
are then retried one by one with the single statement, so only the append that raced gets
IDEMPOTENCY_KEY race handling and the others are stored. seq stays gap-free because a group bumps
each session's `last_seq` by its append's count under the row lock and numbers the events below it,
as the single statement does.

The statements go to asyncpg directly, compiled once, on one connection of the engine's pool that
the writer holds from its first statement until `close` (one statement is ever in flight, so one
connection is all it needs): an append pays neither a pool checkout nor SQLAlchemy's execution path,
which together cost more CPU than asyncpg's own part (about 0.45 of 0.7 ms per append). A
connection that fails other than by the server refusing a statement (lost, cancelled mid-statement)
is dropped from the pool; the next statement takes a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.memory.event_store import IdempotencyKeyRace
from agentmesh.memory.tables import (
    APPEND_IN_ONE_STATEMENT,
    EVENT_ARRAYS,
    FENCED_APPEND_IN_ONE_STATEMENT,
    ID,
    TIME,
)

logger = logging.getLogger(__name__)

# A stored append's (project_id, last_seq), or None when its checks refused it.
AppendRow = tuple[str, int] | None

# The group's arrays, by bind name: one element per append (`request_*`), or per event (the
# placement of each event, then APPEND_IN_ONE_STATEMENT's own event arrays).
_REQUEST_ARRAYS = ("session_id", "project_id", "agent", "now", "count", "expected", "bytes")
_EVENT_PLACEMENT = ("event_session_id", "event_project_id", "position", "event_count", "event_now")
# Each event's values: APPEND_IN_ONE_STATEMENT's text arrays, and its size (`sizes`).
_EVENT_VALUES = (*EVENT_ARRAYS, "size")
# The fence (fence.py): one element per key of an append's `fence_keys`.
_FENCE_ARRAYS = ("fence_session_id", "fence_project_id", "fence_key")
_SQL_TYPES = {"now": "TIMESTAMPTZ", "event_now": "TIMESTAMPTZ"} | dict.fromkeys(
    ("count", "expected", "bytes", "position", "event_count", "size"), "BIGINT"
)
_BIND_TYPES = {"TIMESTAMPTZ": TIME, "BIGINT": sa.BigInteger, "TEXT": sa.Text}


def _bind(name: str, prefix: str) -> str:
    return f"{prefix}{name}s"


def _unnest(names: tuple[str, ...], prefix: str = "") -> str:
    arrays = ", ".join(f"CAST(:{_bind(name, prefix)} AS {_SQL_TYPES.get(name, 'TEXT')}[])" for name in names)
    return f"unnest({arrays}) AS x({', '.join(names)})"


# APPEND_IN_ONE_STATEMENT for several sessions: `request` is one row per append, `bump` its
# session's upsert (refused, as alone, for another project's session, a deleted project, a
# stale expected last seq, or a stored key among its `fence` keys — trusted, as alone, only when
# the locked row is at the last_seq its snapshot `seen`; taken in (project, session) order, as
# every group takes them, so two groups never wait on each other in a cycle), `stored` each event
# numbered below its session's new last seq. Rows back: the sessions bumped.
GROUPED_APPEND = (
    sa.text(
        "WITH request AS (SELECT x.*, (SELECT s.last_seq FROM memory_sessions s "
        "WHERE s.project_id = x.project_id AND s.id = x.session_id) AS seen "
        "FROM " + _unnest(_REQUEST_ARRAYS, "request_") + "), "
        "fence AS (SELECT * FROM " + _unnest(_FENCE_ARRAYS) + "), bump AS ("
        "INSERT INTO memory_sessions "
        "(id, project_id, agent, created_at, updated_at, last_seq, first_seq, stored_bytes) "
        "SELECT r.session_id, r.project_id, r.agent, r.now, r.now, r.count, 1, r.bytes FROM request r "
        "WHERE (r.expected IS NULL OR r.expected = 0 OR EXISTS (SELECT FROM memory_sessions s "
        "WHERE s.project_id = r.project_id AND s.id = r.session_id)) "
        "AND NOT EXISTS (SELECT FROM memory_deleted_projects d WHERE d.project_id = r.project_id) "
        "ORDER BY r.project_id, r.session_id "
        "ON CONFLICT (project_id, id) DO UPDATE "
        "SET last_seq = memory_sessions.last_seq + EXCLUDED.last_seq, updated_at = EXCLUDED.updated_at, "
        "stored_bytes = memory_sessions.stored_bytes + EXCLUDED.stored_bytes "
        "WHERE NOT EXISTS (SELECT FROM request r WHERE r.project_id = EXCLUDED.project_id "
        "AND r.session_id = EXCLUDED.id AND r.expected IS NOT NULL "
        "AND r.expected <> memory_sessions.last_seq) "
        "AND NOT EXISTS (SELECT FROM memory_deleted_projects d WHERE d.project_id = EXCLUDED.project_id) "
        "AND NOT EXISTS (SELECT FROM request r WHERE r.project_id = EXCLUDED.project_id "
        "AND r.session_id = EXCLUDED.id "
        "AND EXISTS (SELECT FROM fence f WHERE f.fence_project_id = r.project_id "
        "AND f.fence_session_id = r.session_id) "
        "AND (r.seen IS DISTINCT FROM memory_sessions.last_seq OR EXISTS (SELECT FROM fence f "
        "JOIN memory_events e ON e.project_id = f.fence_project_id AND e.session_id = f.fence_session_id "
        "AND e.idempotency_key = f.fence_key "
        "WHERE f.fence_project_id = r.project_id AND f.fence_session_id = r.session_id))) "
        "RETURNING project_id, id, last_seq"
        "), stored AS ("
        "INSERT INTO memory_events (session_id, seq, id, project_id, agent, event_type, content, metadata, "
        "run_id, parent_event_id, delegation_id, trace_id, span_id, idempotency_key, created_at, "
        "stored_bytes) "
        "SELECT x.event_session_id, bump.last_seq - x.event_count + x.position, x.id, bump.project_id, "
        "x.agent, x.event_type, x.content, CAST(x.metadata AS JSONB), x.run_id, x.parent_event_id, "
        "x.delegation_id, x.trace_id, x.span_id, x.idempotency_key, x.event_now, x.size "
        "FROM "
        + _unnest(_EVENT_PLACEMENT + _EVENT_VALUES)
        + " JOIN bump ON bump.project_id = x.event_project_id AND bump.id = x.event_session_id"
        ") "
        "SELECT project_id, id, last_seq FROM bump"
    )
    .bindparams(
        *(
            sa.bindparam(
                _bind(name, prefix), type_=postgresql.ARRAY(_BIND_TYPES[_SQL_TYPES.get(name, "TEXT")])
            )
            for names, prefix in (
                (_REQUEST_ARRAYS, "request_"),
                (_EVENT_PLACEMENT + _EVENT_VALUES, ""),
                (_FENCE_ARRAYS, ""),
            )
            for name in names
        )
    )
    .columns(project_id=ID, id=ID, last_seq=sa.BigInteger)
)


class _Compiled:
    """A statement as asyncpg runs it: its SQL with positional parameters, and the order in which
    its named parameters go."""

    def __init__(self, statement: sa.TextClause) -> None:
        compiled = statement.compile(dialect=asyncpg_dialect.dialect())
        self.sql = str(compiled)
        self._names = tuple(compiled.positiontup or ())

    def arguments(self, parameters: Mapping[str, Any]) -> list[Any]:
        return [parameters[name] for name in self._names]


_ALONE = _Compiled(APPEND_IN_ONE_STATEMENT)
_FENCED_ALONE = _Compiled(FENCED_APPEND_IN_ONE_STATEMENT)
_GROUPED = _Compiled(GROUPED_APPEND)
# The unique index a concurrent append's idempotency key violates (tables.event_table).
_IDEMPOTENCY_KEY_INDEX = "uq_memory_events_idempotency_key"


@dataclass
class _Pending:
    parameters: dict[str, Any]  # APPEND_IN_ONE_STATEMENT's
    done: asyncio.Future[AppendRow]

    @property
    def session(self) -> tuple[str, str]:
        return self.parameters["project_id"], self.parameters["session_id"]


class GroupCommit:
    """Runs one-statement appends (APPEND_IN_ONE_STATEMENT's parameters), grouping those that
    queue while a statement is in flight; see the module's docstring."""

    def __init__(self, engine: AsyncEngine, *, max_requests: int = 64, max_events: int = 2000) -> None:
        self._engine = engine  # whose pool lends the writer its connection
        # The writer's connection and its asyncpg connection, held between groups. No transaction
        # is begun on it: each statement is its own.
        self._connection: tuple[AsyncConnection, asyncpg.Connection] | None = None
        self._max_requests = max_requests
        self._max_events = max_events
        self._pending: deque[_Pending] = deque()
        self._writer: asyncio.Task[None] | None = None

    async def append(self, parameters: dict[str, Any]) -> AppendRow:
        """The append's (project_id, last_seq), None when its checks refused it; raises what its
        statement raised when it ran alone."""
        pending = _Pending(parameters, asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="memory group commit")
        return await pending.done

    async def close(self) -> None:
        """Gives the writer's connection back to the pool (before the engine is disposed)."""
        if self._writer is not None:
            await asyncio.wait([self._writer])
        if self._connection is not None:
            connection, _ = self._connection
            self._connection = None
            await connection.close()

    async def _write(self) -> None:
        group: list[_Pending] = []
        try:
            while self._pending:
                group = self._take()
                if group:
                    await self._commit(group)
        except BaseException as error:
            for pending in [*group, *self._pending]:
                if not pending.done.done():
                    pending.done.set_exception(error)
            self._pending.clear()
            raise
        finally:
            self._writer = None

    def _take(self) -> list[_Pending]:
        """The next group: the oldest waiting appends, one per session, within the bounds."""
        group: list[_Pending] = []
        sessions: set[tuple[str, str]] = set()
        events = 0
        later: deque[_Pending] = deque()
        while self._pending:
            pending = self._pending.popleft()
            if pending.done.done():  # its caller went away before it was written
                continue
            count = pending.parameters["count"]
            full = len(group) >= self._max_requests or (group and events + count > self._max_events)
            if full or pending.session in sessions:
                later.append(pending)
                continue
            group.append(pending)
            sessions.add(pending.session)
            events += count
        self._pending = later
        return group

    async def _commit(self, group: list[_Pending]) -> None:
        if len(group) > 1:
            try:
                rows = await self._grouped(group)
            except Exception:
                logger.debug(
                    "a group of %d appends failed; each goes alone", len(group), exc_info=True
                )  # nothing was written: each goes alone below, and meets its own error
            else:
                for pending in group:
                    _settle(pending, result=rows.get(pending.session))
                return
        for pending in group:
            try:
                row = await self._alone(pending.parameters)
            except Exception as error:
                _settle(pending, error=error)
            else:
                _settle(pending, result=row)

    async def _alone(self, parameters: dict[str, Any]) -> AppendRow:
        statement = _FENCED_ALONE if parameters["fence_keys"] else _ALONE
        try:
            rows = await self._fetch(statement, parameters)
        except asyncpg.UniqueViolationError as error:
            if error.constraint_name == _IDEMPOTENCY_KEY_INDEX:
                raise IdempotencyKeyRace(parameters["session_id"]) from error
            raise
        return (rows[0][0], rows[0][1]) if rows else None

    async def _grouped(self, group: list[_Pending]) -> dict[tuple[str, str], AppendRow]:
        arrays: dict[str, list[Any]] = {_bind(name, "request_"): [] for name in _REQUEST_ARRAYS}
        arrays |= {_bind(name, ""): [] for name in _EVENT_PLACEMENT + _EVENT_VALUES + _FENCE_ARRAYS}
        for pending in group:
            p = pending.parameters
            for name in _REQUEST_ARRAYS:
                arrays[_bind(name, "request_")].append(p[name])
            count = p["count"]
            arrays["event_session_ids"] += [p["session_id"]] * count
            arrays["event_project_ids"] += [p["project_id"]] * count
            arrays["positions"] += range(1, count + 1)
            arrays["event_counts"] += [count] * count
            arrays["event_nows"] += [p["now"]] * count
            for name in _EVENT_VALUES:
                arrays[_bind(name, "")] += p[_bind(name, "")]
            fence = p["fence_keys"]
            arrays["fence_session_ids"] += [p["session_id"]] * len(fence)
            arrays["fence_project_ids"] += [p["project_id"]] * len(fence)
            arrays["fence_keys"] += fence
        rows = await self._fetch(_GROUPED, arrays)
        logger.debug("%d appends in one statement", len(group))
        return {(row[0], row[1]): (row[0], row[2]) for row in rows}

    async def _fetch(self, statement: _Compiled, parameters: Mapping[str, Any]) -> list[asyncpg.Record]:
        """The statement's rows, run on the writer's connection."""
        if self._connection is None:
            connection = await self._engine.connect()
            self._connection = (connection, (await connection.get_raw_connection()).driver_connection)
        connection, driver = self._connection
        try:
            return await driver.fetch(statement.sql, *statement.arguments(parameters))
        except BaseException as error:
            # A statement the server refused leaves the connection as it was; anything else
            # (the connection lost, the statement cancelled midway) may not have.
            if not isinstance(error, asyncpg.PostgresError) or driver.is_closed():
                self._connection = None
                await connection.invalidate()
                await connection.close()
            raise


def _settle(pending: _Pending, *, result: AppendRow = None, error: Exception | None = None) -> None:
    if pending.done.done():  # its caller was cancelled meanwhile: the append stands, unanswered
        return
    if error is not None:
        pending.done.set_exception(error)
    else:
        pending.done.set_result(result)
