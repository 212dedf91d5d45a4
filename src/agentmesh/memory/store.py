"""Storage of sessions, their events and retention policies: the interface the rules depend on,
and its SQLAlchemy Core implementation for PostgreSQL and SQLite.

How `seq` stays gap-free under concurrent writers: each session row holds `last_seq`. An append
is one transaction that first bumps it (`INSERT … ON CONFLICT DO UPDATE SET last_seq = last_seq +
n … RETURNING`, which also creates the session on first use), then inserts the events numbered
below the returned value. In PostgreSQL the upsert takes the session row's lock, so writers of one
session queue there and commit in `seq` order; in SQLite the first statement being a write takes
the database's write lock, and an in-process lock queues this process's writers in front of it.
No append reads `count(*)` or `max(seq)`: its cost does not grow with the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.memory.models import Event, EventQuery, EventType, NewEvent, RetentionPolicy, Session

metadata = sa.MetaData()

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ID = sa.String(255)
_TIME = sa.DateTime(timezone=True)

session_table = sa.Table(
    "memory_sessions",
    metadata,
    sa.Column("id", _ID, primary_key=True),
    sa.Column("project_id", _ID, nullable=False),
    sa.Column("agent", _ID, nullable=False),
    sa.Column("created_at", _TIME, nullable=False),
    sa.Column("updated_at", _TIME, nullable=False),
    sa.Column("last_seq", sa.BigInteger, nullable=False),
    sa.Column("first_seq", sa.BigInteger, nullable=False),
    sa.Index("ix_memory_sessions_project_activity", "project_id", "updated_at", "id"),
)

event_table = sa.Table(
    "memory_events",
    metadata,
    sa.Column("session_id", _ID, sa.ForeignKey("memory_sessions.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("id", sa.String(36), nullable=False),
    sa.Column("project_id", _ID, nullable=False),
    sa.Column("agent", _ID, nullable=False),
    sa.Column("event_type", sa.String(32), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("metadata", _JSON, nullable=False),
    sa.Column("run_id", _ID, nullable=False),
    sa.Column("parent_event_id", _ID, nullable=False),
    sa.Column("delegation_id", _ID, nullable=False),
    sa.Column("trace_id", sa.String(32), nullable=False),
    sa.Column("span_id", sa.String(16), nullable=False),
    sa.Column("idempotency_key", _ID, nullable=True),
    sa.Column("created_at", _TIME, nullable=False),
    sa.UniqueConstraint("id", name="uq_memory_events_id"),
    # NULL keys (no key given) never collide, in both databases.
    sa.UniqueConstraint("session_id", "idempotency_key", name="uq_memory_events_idempotency_key"),
    # An agent's window in a session (the executor's context): newest N by seq, no full scan.
    sa.Index("ix_memory_events_session_agent_seq", "session_id", "agent", "seq"),
    # One agent's events across a project's sessions, in time order.
    sa.Index("ix_memory_events_project_agent_time", "project_id", "agent", "created_at", "session_id", "seq"),
)

retention_table = sa.Table(
    "memory_retention_policies",
    metadata,
    sa.Column("project_id", _ID, primary_key=True),
    sa.Column("max_age_seconds", sa.BigInteger, nullable=False),
    sa.Column("max_events_per_session", sa.BigInteger, nullable=False),
    sa.Column("updated_at", _TIME, nullable=False),
)

_EVENT_COLUMNS = (
    event_table.c.id,
    event_table.c.session_id,
    event_table.c.seq,
    event_table.c.agent,
    event_table.c.event_type,
    event_table.c.content,
    event_table.c["metadata"],
    event_table.c.run_id,
    event_table.c.parent_event_id,
    event_table.c.delegation_id,
    event_table.c.trace_id,
    event_table.c.span_id,
    event_table.c.idempotency_key,
    event_table.c.created_at,
)
_EVENT_FIELDS = tuple(column.key for column in _EVENT_COLUMNS)
_SESSION_COLUMNS = (
    session_table.c.id,
    session_table.c.project_id,
    session_table.c.agent,
    session_table.c.created_at,
    session_table.c.updated_at,
    session_table.c.last_seq,
    session_table.c.first_seq,
)

# Creates the session or moves its last_seq on by :count, returning the new value; in PostgreSQL it
# also locks the session row until commit. Text, because SQLAlchemy 2.0 does not cache the
# compiled form of the dialects' INSERT … ON CONFLICT constructs, and this runs on every append.
_BUMP_LAST_SEQ = (
    sa.text(
        "INSERT INTO memory_sessions (id, project_id, agent, created_at, updated_at, last_seq, first_seq) "
        "VALUES (:id, :project_id, :agent, :now, :now, :count, 1) "
        "ON CONFLICT (id) DO UPDATE SET last_seq = memory_sessions.last_seq + :count, updated_at = :now "
        "RETURNING project_id, last_seq"
    )
    .bindparams(
        sa.bindparam("id", type_=_ID),
        sa.bindparam("project_id", type_=_ID),
        sa.bindparam("agent", type_=_ID),
        sa.bindparam("now", type_=_TIME),
        sa.bindparam("count", type_=sa.BigInteger),
    )
    .columns(project_id=_ID, last_seq=sa.BigInteger)
)

# The sort key a page of events resumes after: (seq,) within a session; (created_at, session_id,
# seq) for an agent across sessions. Sessions resume after (updated_at, id).
EventCursor = tuple[Any, ...]
SessionCursor = tuple[datetime, str]
# Called inside an append's transaction with the session's project and its last seq before the
# append; raising rolls the whole append back.
AdmitAppend = Callable[[str, int], None]


class IdempotencyKeyRace(Exception):
    """A concurrent append stored one of the batch's idempotency keys first; nothing was written."""


class EventStore(Protocol):
    """What the memory rules need from storage."""

    async def append(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
    ) -> tuple[list[Event], int]: ...

    async def events_by_idempotency_key(self, session_id: str, keys: Sequence[str]) -> dict[str, Event]: ...

    async def get_session(self, session_id: str) -> Session | None: ...

    async def list_events(
        self, query: EventQuery, *, after: EventCursor | None, limit: int
    ) -> list[Event]: ...

    async def count_events(self, query: EventQuery) -> int: ...

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]: ...

    async def count_sessions(self, project_id: str) -> int: ...

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy | None: ...

    async def set_retention_policy(self, policy: RetentionPolicy, *, now: datetime) -> RetentionPolicy: ...

    async def bounded_retention_policies(self) -> list[RetentionPolicy]: ...

    async def sessions_to_trim(
        self,
        project_id: str,
        *,
        more_events_than: int | None,
        created_before: datetime | None,
        after_id: str,
        limit: int,
    ) -> list[Session]: ...

    async def expired_prefix_end(
        self, session_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int: ...

    async def trim_session(self, session_id: str, *, first_seq: int) -> int: ...


def _utc(moment: datetime) -> datetime:
    # SQLite keeps no time zone; every time stored here is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _event(row: Sequence[Any]) -> Event:
    values = dict(zip(_EVENT_FIELDS, row, strict=True))
    values["event_type"] = EventType(values["event_type"])
    values["metadata"] = values["metadata"] or {}
    values["idempotency_key"] = values["idempotency_key"] or ""
    values["created_at"] = _utc(values["created_at"])
    # Rows were validated on the way in; skip validating them again on every read.
    return Event.model_construct(**values)


def _session(row: Sequence[Any]) -> Session:
    id_, project_id, agent, created, updated, last_seq, first_seq = row
    return Session.model_construct(
        id=id_,
        project_id=project_id,
        agent=agent,
        created_at=_utc(created),
        updated_at=_utc(updated),
        last_seq=last_seq,
        first_seq=first_seq,
    )


def _event_conditions(query: EventQuery) -> list[sa.ColumnElement[bool]]:
    c = event_table.c
    conditions = (
        [c.session_id == query.session_id] if query.session_id else [c.project_id == query.project_id]
    )
    if query.agent:
        conditions.append(c.agent == query.agent)
    if query.event_types:
        conditions.append(c.event_type.in_([kind.value for kind in query.event_types]))
    if query.run_id:
        conditions.append(c.run_id == query.run_id)
    if query.after_seq:
        conditions.append(c.seq > query.after_seq)
    return conditions


class SqlEventStore:
    """EventStore on PostgreSQL (asyncpg) or SQLite (aiosqlite), through SQLAlchemy Core."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        # Every read here is one statement: run outside an explicit transaction, it spares the
        # BEGIN and ROLLBACK round trips (the statement is its own snapshot).
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        # SQLite has one writer per database. Queueing this process's writers here is free, and
        # spares them SQLite's busy-wait backoff (the busy timeout still covers other processes).
        self._sqlite_writer = None if self._postgres else asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        async with contextlib.AsyncExitStack() as stack:
            if self._sqlite_writer is not None:
                await stack.enter_async_context(self._sqlite_writer)
            yield await stack.enter_async_context(self._engine.begin())

    def _upsert(self, table: sa.Table) -> Any:
        return postgresql.insert(table) if self._postgres else sqlite.insert(table)

    # --- appending ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
    ) -> tuple[list[Event], int]:
        count = len(batch)
        parameters = {
            "id": session_id,
            "project_id": project_id,
            "agent": batch[0].agent,
            "now": now,
            "count": count,
        }
        async with self._write() as connection:
            session_project, last_seq = (await connection.execute(_BUMP_LAST_SEQ, parameters)).one()
            admit(session_project, last_seq - count)
            stored = [
                Event.model_construct(
                    **dict(event),
                    id=str(uuid.uuid4()),
                    session_id=session_id,
                    seq=last_seq - count + 1 + index,
                    created_at=now,
                )
                for index, event in enumerate(batch)
            ]
            rows = [
                {
                    "session_id": session_id,
                    "seq": event.seq,
                    "id": event.id,
                    "project_id": session_project,
                    "agent": event.agent,
                    "event_type": event.event_type.value,
                    "content": event.content,
                    "metadata": event.metadata,
                    "run_id": event.run_id,
                    "parent_event_id": event.parent_event_id,
                    "delegation_id": event.delegation_id,
                    "trace_id": event.trace_id,
                    "span_id": event.span_id,
                    "idempotency_key": event.idempotency_key or None,
                    "created_at": now,
                }
                for event in stored
            ]
            try:
                await connection.execute(event_table.insert(), rows)
            except IntegrityError as error:
                if "idempotency_key" in str(error.orig):
                    raise IdempotencyKeyRace(session_id) from error
                raise
        return stored, last_seq

    async def events_by_idempotency_key(self, session_id: str, keys: Sequence[str]) -> dict[str, Event]:
        query = sa.select(*_EVENT_COLUMNS).where(
            event_table.c.session_id == session_id, event_table.c.idempotency_key.in_(list(keys))
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(query)).all()
        found = [_event(row) for row in rows]
        return {event.idempotency_key: event for event in found}

    # --- reading -----------------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session | None:
        query = sa.select(*_SESSION_COLUMNS).where(session_table.c.id == session_id)
        async with self._reader.connect() as connection:
            row = (await connection.execute(query)).first()
        return _session(row) if row is not None else None

    async def list_events(self, query: EventQuery, *, after: EventCursor | None, limit: int) -> list[Event]:
        c = event_table.c
        key = (c.seq,) if query.session_id else (c.created_at, c.session_id, c.seq)
        conditions = _event_conditions(query)
        if after is not None:
            position = key[0] if len(key) == 1 else sa.tuple_(*key)
            value = (
                after[0]
                if len(key) == 1
                else sa.tuple_(*(sa.literal(v, k.type) for v, k in zip(after, key, strict=True)))
            )
            conditions.append(position < value if query.descending else position > value)
        order = [column.desc() for column in key] if query.descending else list(key)
        statement = sa.select(*_EVENT_COLUMNS).where(*conditions).order_by(*order).limit(limit)
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [_event(row) for row in rows]

    async def count_events(self, query: EventQuery) -> int:
        statement = sa.select(sa.func.count()).select_from(event_table).where(*_event_conditions(query))
        async with self._reader.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]:
        c = session_table.c
        statement = sa.select(*_SESSION_COLUMNS).where(c.project_id == project_id)
        if after is not None:
            statement = statement.where(
                sa.tuple_(c.updated_at, c.id)
                < sa.tuple_(sa.literal(after[0], _TIME), sa.literal(after[1], _ID))
            )
        statement = statement.order_by(c.updated_at.desc(), c.id.desc()).limit(limit)
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [_session(row) for row in rows]

    async def count_sessions(self, project_id: str) -> int:
        statement = (
            sa.select(sa.func.count())
            .select_from(session_table)
            .where(session_table.c.project_id == project_id)
        )
        async with self._reader.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

    # --- retention ---------------------------------------------------------------------------

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy | None:
        c = retention_table.c
        statement = sa.select(c.project_id, c.max_age_seconds, c.max_events_per_session).where(
            c.project_id == project_id
        )
        async with self._reader.connect() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return None
        return RetentionPolicy(project_id=row[0], max_age_seconds=row[1], max_events_per_session=row[2])

    async def set_retention_policy(self, policy: RetentionPolicy, *, now: datetime) -> RetentionPolicy:
        values = {
            "max_age_seconds": policy.max_age_seconds,
            "max_events_per_session": policy.max_events_per_session,
            "updated_at": now,
        }
        statement = (
            self._upsert(retention_table)
            .values(project_id=policy.project_id, **values)
            .on_conflict_do_update(index_elements=[retention_table.c.project_id], set_=values)
        )
        async with self._write() as connection:
            await connection.execute(statement)
        return policy

    async def bounded_retention_policies(self) -> list[RetentionPolicy]:
        c = retention_table.c
        statement = (
            sa.select(c.project_id, c.max_age_seconds, c.max_events_per_session)
            .where(sa.or_(c.max_age_seconds > 0, c.max_events_per_session > 0))
            .order_by(c.project_id)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [
            RetentionPolicy(project_id=row[0], max_age_seconds=row[1], max_events_per_session=row[2])
            for row in rows
        ]

    async def sessions_to_trim(
        self,
        project_id: str,
        *,
        more_events_than: int | None,
        created_before: datetime | None,
        after_id: str,
        limit: int,
    ) -> list[Session]:
        c = session_table.c
        reasons = []
        if more_events_than is not None:
            reasons.append(c.last_seq - c.first_seq + 1 > more_events_than)
        if created_before is not None:
            reasons.append(c.created_at < created_before)
        if not reasons:
            return []
        statement = (
            sa.select(*_SESSION_COLUMNS)
            .where(c.project_id == project_id, c.id > after_id, c.first_seq <= c.last_seq, sa.or_(*reasons))
            .order_by(c.id)
            .limit(limit)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [_session(row) for row in rows]

    async def expired_prefix_end(
        self, session_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int:
        """The seq after the longest run of events older than `cutoff`, starting at `from_seq` and
        looking at no more than `limit` events (`from_seq` itself when the first is not old)."""
        statement = (
            sa.select(event_table.c.seq, event_table.c.created_at)
            .where(event_table.c.session_id == session_id, event_table.c.seq >= from_seq)
            .order_by(event_table.c.seq)
            .limit(limit)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        end = from_seq
        for seq, created_at in rows:
            if _utc(created_at) >= cutoff:
                break
            end = seq + 1
        return end

    async def trim_session(self, session_id: str, *, first_seq: int) -> int:
        """Removes the session's events below `first_seq` and records that they are gone, in one
        transaction. Returns how many events were removed."""
        c = session_table.c
        # The session row first, as appends take it first: the two never wait on each other in
        # opposite orders.
        advance = (
            sa.update(session_table)
            .where(c.id == session_id, c.first_seq < first_seq, c.last_seq + 1 >= first_seq)
            .values(first_seq=first_seq)
        )
        delete = sa.delete(event_table).where(
            event_table.c.session_id == session_id, event_table.c.seq < first_seq
        )
        async with self._write() as connection:
            if (await connection.execute(advance)).rowcount == 0:
                return 0
            return (await connection.execute(delete)).rowcount
