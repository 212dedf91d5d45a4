"""Storage of sessions, their events and retention policies: the interface the rules depend on,
and its SQLAlchemy Core implementation for PostgreSQL and SQLite.

How `seq` stays gap-free under concurrent writers: each session row holds `last_seq`. An append
first bumps it (`INSERT … ON CONFLICT DO UPDATE SET last_seq = last_seq + n … RETURNING`, which
also creates the session on first use), then inserts the events numbered below the returned value,
atomically. In PostgreSQL the upsert takes the session row's lock, so writers of one session queue
there and commit in `seq` order; in SQLite the first statement being a write takes the database's
write lock, and an in-process lock queues this process's writers in front of it. No append reads
`count(*)` or `max(seq)`: its cost does not grow with the session.

In PostgreSQL an append naming its project is one statement run outside an explicit transaction
(one round trip, not BEGIN, upsert, insert and COMMIT): the upsert and the insert are data-modifying
CTEs of one statement, which is atomic by itself. The checks `admit` makes inside the transaction
are made there by the upsert's conflict `WHERE` (same project, expected last seq); when it refuses,
nothing is written and the store reads the session to let `admit` raise the error. SQLite cannot
modify data in CTEs, and an append without a project must ask `admit` before anything is written:
those take the transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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

# The event columns a one-statement append sends as arrays, one element per event.
_EVENT_ARRAYS = (
    "id",
    "agent",
    "event_type",
    "content",
    "metadata",
    "run_id",
    "parent_event_id",
    "delegation_id",
    "trace_id",
    "span_id",
    "idempotency_key",
)
# The whole of a PostgreSQL append, in one statement (see the module docstring). `bump` is
# _BUMP_LAST_SEQ refusing, instead of updating, a session of another project or one not at
# :expected; its row lock serializes the writers of a session as in the transaction. A session not
# yet there cannot be at a positive :expected, so it is not created then (a session the snapshot
# misses but a concurrent append creates conflicts, and is checked, as any other). `stored` numbers
# the batch below the new last_seq. No row back: `bump` refused, and nothing was written.
_APPEND_IN_ONE_STATEMENT = (
    sa.text(
        "WITH bump AS ("
        "INSERT INTO memory_sessions (id, project_id, agent, created_at, updated_at, last_seq, first_seq) "
        "SELECT CAST(:session_id AS TEXT), CAST(:project_id AS TEXT), CAST(:agent AS TEXT), "
        "CAST(:now AS TIMESTAMPTZ), CAST(:now AS TIMESTAMPTZ), CAST(:count AS BIGINT), 1 "
        "WHERE CAST(:expected AS BIGINT) IS NULL OR CAST(:expected AS BIGINT) = 0 "
        "OR EXISTS (SELECT FROM memory_sessions WHERE id = CAST(:session_id AS TEXT)) "
        "ON CONFLICT (id) DO UPDATE "
        "SET last_seq = memory_sessions.last_seq + CAST(:count AS BIGINT), "
        "updated_at = CAST(:now AS TIMESTAMPTZ) "
        "WHERE memory_sessions.project_id = CAST(:project_id AS TEXT) AND (CAST(:expected AS BIGINT) IS NULL "
        "OR memory_sessions.last_seq = CAST(:expected AS BIGINT)) "
        "RETURNING project_id, last_seq"
        "), stored AS ("
        "INSERT INTO memory_events (session_id, seq, id, project_id, agent, event_type, content, metadata, "
        "run_id, parent_event_id, delegation_id, trace_id, span_id, idempotency_key, created_at) "
        "SELECT CAST(:session_id AS TEXT), bump.last_seq - CAST(:count AS BIGINT) + e.position, e.id, "
        "bump.project_id, e.agent, e.event_type, e.content, CAST(e.metadata AS JSONB), e.run_id, "
        "e.parent_event_id, e.delegation_id, e.trace_id, e.span_id, e.idempotency_key, "
        "CAST(:now AS TIMESTAMPTZ) "
        "FROM bump, unnest("
        + ", ".join(f"CAST(:{name}s AS TEXT[])" for name in _EVENT_ARRAYS)
        + ") WITH ORDINALITY AS e("
        + ", ".join(_EVENT_ARRAYS)
        + ", position)"
        ") "
        "SELECT project_id, last_seq FROM bump"
    )
    .bindparams(
        sa.bindparam("session_id", type_=sa.Text),
        sa.bindparam("project_id", type_=sa.Text),
        sa.bindparam("agent", type_=sa.Text),
        sa.bindparam("now", type_=_TIME),
        sa.bindparam("count", type_=sa.BigInteger),
        sa.bindparam("expected", type_=sa.BigInteger),
        *(sa.bindparam(f"{name}s", type_=postgresql.ARRAY(sa.Text)) for name in _EVENT_ARRAYS),
    )
    .columns(project_id=_ID, last_seq=sa.BigInteger)
)

# The sort key a page of events resumes after: (seq,) within a session; (created_at, session_id,
# seq) for an agent across sessions. Sessions resume after (updated_at, id).
EventCursor = tuple[Any, ...]
SessionCursor = tuple[datetime, str]
# Says whether an append may go ahead, given the session's project ("" when the append creates it)
# and its last seq before the append, by raising the error that refuses it. Called inside the
# append's transaction (raising rolls the whole append back), or after a one-statement append
# whose conflict WHERE refused it, to raise the error that says why.
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
        expected_last_seq: int | None = None,
    ) -> tuple[list[Event], int]:
        """Stores the batch after the session's last event and returns it with the new last seq.

        `admit` decides; `expected_last_seq` (the one `admit` checks) lets the store check it in
        the database, before writing, instead of in a transaction around the write."""
        ...

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

    async def session_boundary(self, project_id: str, *, skip: int) -> SessionCursor | None:
        """The cursor of the `skip`-th session in list order (the last one when there are fewer),
        None when the project has none: where page N starts, found without OFFSET."""
        ...

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
        expected_last_seq: int | None = None,
    ) -> tuple[list[Event], int]:
        if self._postgres and project_id:
            appended = await self._append_in_one_statement(
                session_id, project_id, batch, now=now, admit=admit, expected_last_seq=expected_last_seq
            )
            if appended is not None:
                return appended
        return await self._append_in_transaction(session_id, project_id, batch, now=now, admit=admit)

    async def _append_in_one_statement(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
        expected_last_seq: int | None,
    ) -> tuple[list[Event], int] | None:
        """The append as one autocommitted statement, or None when the session changed between
        the statement refusing it and the read saying why: the transaction then decides."""
        count = len(batch)
        ids = [str(uuid.uuid4()) for _ in batch]
        parameters: dict[str, Any] = {
            "session_id": session_id,
            "project_id": project_id,
            "agent": batch[0].agent,
            "now": now,
            "count": count,
            "expected": expected_last_seq,
            "ids": ids,
            "agents": [event.agent for event in batch],
            "event_types": [event.event_type.value for event in batch],
            "contents": [event.content for event in batch],
            "metadatas": [json.dumps(event.metadata) for event in batch],
            "run_ids": [event.run_id for event in batch],
            "parent_event_ids": [event.parent_event_id for event in batch],
            "delegation_ids": [event.delegation_id for event in batch],
            "trace_ids": [event.trace_id for event in batch],
            "span_ids": [event.span_id for event in batch],
            "idempotency_keys": [event.idempotency_key or None for event in batch],
        }
        try:
            async with self._reader.connect() as connection:
                row = (await connection.execute(_APPEND_IN_ONE_STATEMENT, parameters)).first()
        except IntegrityError as error:
            if "idempotency_key" in str(error.orig):
                raise IdempotencyKeyRace(session_id) from error
            raise
        if row is None:
            # Refused, nothing written: let admit say why. A session that is not there is one the
            # append would create, at seq 0.
            session = await self.get_session(session_id)
            if session is None:
                admit(project_id, 0)
            else:
                admit(session.project_id, session.last_seq)
            return None
        session_project, last_seq = row
        admit(session_project, last_seq - count)
        stored = [
            Event.model_construct(
                **dict(event),
                id=event_id,
                session_id=session_id,
                seq=last_seq - count + 1 + index,
                created_at=now,
            )
            for index, (event, event_id) in enumerate(zip(batch, ids, strict=True))
        ]
        return stored, last_seq

    async def _append_in_transaction(
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

    async def session_boundary(self, project_id: str, *, skip: int) -> SessionCursor | None:
        # The last of the first `skip` keys, read from the (project_id, updated_at, id) index:
        # one query that stops after `skip` entries and fetches no other column.
        c = session_table.c
        head = (
            sa.select(c.updated_at, c.id)
            .where(c.project_id == project_id)
            .order_by(c.updated_at.desc(), c.id.desc())
            .limit(skip)
            .subquery()
        )
        statement = sa.select(head.c.updated_at, head.c.id).order_by(head.c.updated_at, head.c.id).limit(1)
        async with self._reader.connect() as connection:
            row = (await connection.execute(statement)).first()
        return None if row is None else (_utc(row[0]), row[1])

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
