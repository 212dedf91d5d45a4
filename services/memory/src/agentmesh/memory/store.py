"""Storage of sessions, their events and retention policies: the SQLAlchemy Core implementation, for
PostgreSQL and SQLite, of the interface the rules depend on (`event_store.py`).

How `seq` stays gap-free under concurrent writers: each session row holds `last_seq`. An append
first bumps it (`INSERT … ON CONFLICT DO UPDATE SET last_seq = last_seq + n … RETURNING`, which
also creates the session on first use), then inserts the events numbered below the returned value,
atomically. In PostgreSQL the upsert takes the session row's lock, so writers of one session queue
there and commit in `seq` order; in SQLite the first statement being a write takes the database's
write lock, and an in-process lock queues this process's writers in front of it. No append reads
`count(*)` or `max(seq)`: its cost does not grow with the session.

A session is its project's: it is identified by (project_id, session_id), so two projects may use
the same client-chosen id. An append for a project recorded as deleted is refused in the same
statement or transaction that would write it.

In PostgreSQL an append naming its project is one statement run outside an explicit transaction
(one round trip, not BEGIN, upsert, insert and COMMIT): the upsert and the insert are data-modifying
CTEs of one statement, which is atomic by itself. The checks `admit` makes inside the transaction
are made there by the upsert's conflict `WHERE` (same project, expected last seq); when it refuses,
nothing is written and the store reads the session to let `admit` raise the error. SQLite cannot
modify data in CTEs, and an append without a project must ask `admit` before anything is written:
those take the transaction.

The run fence (fence.py) is checked under the same lock, atomically with the write: in SQLite by
the bump statement itself; in PostgreSQL by the one statement when no append went in between its
snapshot and its row lock, else by a look-up in the transaction after the bump (tables.py).

PostgreSQL's one-statement appends of different sessions that queue while one is in flight are
written together by one statement (`group_commit.py`), each keeping its own refusal.
SQLite's appends are serialized by the writer lock and stay one transaction each.

Retention and project erasure are in `retention_store.py`, mixed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.memory.errors import ProjectDeleted
from agentmesh.memory.event_store import (
    AdmitAppend,
    EventCursor,
    FenceRefused,
    IdempotencyKeyRace,
    SessionCursor,
)
from agentmesh.memory.group_commit import GroupCommit
from agentmesh.memory.models import Event, EventQuery, NewEvent, Session
from agentmesh.memory.retention_store import SqlRetention
from agentmesh.memory.rows import (
    event_conditions,
    event_row,
    events_by_key,
    new_event_ids,
    session_row,
    utc,
)
from agentmesh.memory.tables import (
    BUMP_LAST_SEQ,
    EVENT_COLUMNS,
    ID,
    SESSION_COLUMNS,
    SQLITE_FENCED_BUMP_LAST_SEQ,
    TIME,
    deleted_project_table,
    event_table,
    one_statement_append,
    session_table,
)
from agentmesh.memory.tables import metadata as metadata  # the migrations read it here
from agentmesh.memory.validation import event_bytes


class SqlEventStore(SqlRetention):
    """EventStore on PostgreSQL (asyncpg) or SQLite (aiosqlite), through SQLAlchemy Core."""

    def __init__(self, engine: AsyncEngine, *, group_commit: bool = True) -> None:
        self._engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        # Every read here is one statement: run outside an explicit transaction, it spares the
        # BEGIN and ROLLBACK round trips (the statement is its own snapshot).
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        # PostgreSQL's one-statement appends of different sessions, grouped (group_commit.py).
        self._groups = GroupCommit(self._reader) if self._postgres and group_commit else None
        # SQLite has one writer per database. Queueing this process's writers here is free, and
        # spares them SQLite's busy-wait backoff (the busy timeout still covers other processes).
        self._sqlite_writer = None if self._postgres else asyncio.Lock()

    async def close(self) -> None:
        """Gives back the connection the group commit holds; before the engine is disposed."""
        if self._groups is not None:
            await self._groups.close()

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
        fence: Sequence[str] = (),
    ) -> tuple[list[Event], int]:
        if self._postgres and project_id:
            appended = await self._append_in_one_statement(
                session_id,
                project_id,
                batch,
                now=now,
                admit=admit,
                expected_last_seq=expected_last_seq,
                fence=fence,
            )
            if appended is not None:
                return appended
        return await self._append_in_transaction(
            session_id, project_id, batch, now=now, admit=admit, fence=fence
        )

    async def _append_in_one_statement(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
        expected_last_seq: int | None,
        fence: Sequence[str],
    ) -> tuple[list[Event], int] | None:
        """The append as one autocommitted statement, or None when the session changed between
        the statement refusing it and the read saying why: the transaction then decides."""
        count = len(batch)
        ids = new_event_ids(count)
        sizes = [event_bytes(event) for event in batch]
        parameters: dict[str, Any] = {
            "session_id": session_id,
            "project_id": project_id,
            "agent": batch[0].agent,
            "now": now,
            "count": count,
            "expected": expected_last_seq,
            "bytes": sum(sizes),
            "sizes": sizes,
            "fence_keys": list(fence),
            "ids": ids,
            "agents": [event.agent for event in batch],
            "event_types": [event.event_type.value for event in batch],
            "contents": [event.content for event in batch],
            # Most events carry no metadata: their JSON needs no encoder.
            "metadatas": [json.dumps(event.metadata) if event.metadata else "{}" for event in batch],
            "run_ids": [event.run_id for event in batch],
            "parent_event_ids": [event.parent_event_id for event in batch],
            "delegation_ids": [event.delegation_id for event in batch],
            "trace_ids": [event.trace_id for event in batch],
            "span_ids": [event.span_id for event in batch],
            "idempotency_keys": [event.idempotency_key or None for event in batch],
        }
        try:
            if self._groups is not None:
                row = await self._groups.append(parameters)
            else:
                async with self._reader.connect() as connection:
                    row = (await connection.execute(one_statement_append(parameters), parameters)).first()
        except IntegrityError as error:
            if "idempotency_key" in str(error.orig):
                raise IdempotencyKeyRace(session_id) from error
            raise
        if row is None:
            # Refused, nothing written: let admit say why. A session that is not there is one the
            # append would create, at seq 0.
            if await self._deleted(project_id):
                raise ProjectDeleted(project_id)
            session = await self.get_session(session_id, project_id)
            if session is None:
                admit(project_id, 0)
            else:
                admit(session.project_id, session.last_seq)
            if fence:
                async with self._reader.connect() as reader:
                    await self._check_fence(reader, session_id, project_id, fence)
            return None  # the session moved meanwhile: the transaction decides
        session_project, last_seq = row
        admit(session_project, last_seq - count)
        first_seq = last_seq - count + 1
        stored = [
            Event.trusted(
                {
                    **vars(event),
                    "id": event_id,
                    "session_id": session_id,
                    "seq": first_seq + index,
                    "created_at": now,
                }
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
        fence: Sequence[str],
    ) -> tuple[list[Event], int]:
        count = len(batch)
        sizes = [event_bytes(event) for event in batch]
        parameters = {
            "id": session_id,
            "project_id": project_id,
            "agent": batch[0].agent,
            "now": now,
            "count": count,
            "bytes": sum(sizes),
        }
        # The fence (fence.py) under the session's lock: SQLite's bump checks it itself;
        # PostgreSQL's look-up comes after the bump, whose row lock it then reads behind.
        fenced_bump = bool(fence) and not self._postgres
        async with self._write() as connection:
            if fenced_bump:
                bump = (SQLITE_FENCED_BUMP_LAST_SEQ, {**parameters, "fence_keys": list(fence)})
            else:
                bump = (BUMP_LAST_SEQ, parameters)
            bumped = (await connection.execute(*bump)).first()
            if bumped is None:
                if fenced_bump:  # refused for a stored fence key, or for a deleted project
                    await self._check_fence(connection, session_id, project_id, fence)
                raise ProjectDeleted(project_id)
            session_project, last_seq = bumped
            admit(session_project, last_seq - count)
            if fence and not fenced_bump:
                await self._check_fence(connection, session_id, session_project, fence)
            first_seq = last_seq - count + 1
            stored = [
                Event.trusted(
                    {
                        **vars(event),
                        "id": event_id,
                        "session_id": session_id,
                        "seq": first_seq + index,
                        "created_at": now,
                    }
                )
                for index, (event, event_id) in enumerate(zip(batch, new_event_ids(count), strict=True))
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
                    "stored_bytes": size,
                }
                for event, size in zip(stored, sizes, strict=True)
            ]
            try:
                await connection.execute(event_table.insert(), rows)
            except IntegrityError as error:
                if "idempotency_key" in str(error.orig):
                    raise IdempotencyKeyRace(session_id) from error
                raise
        return stored, last_seq

    async def _check_fence(
        self, connection: AsyncConnection, session_id: str, project_id: str, fence: Sequence[str]
    ) -> None:
        """Raises FenceRefused when one of the `fence` keys is stored in the session."""
        found = await events_by_key(connection, session_id, project_id, fence)
        if found:
            raise FenceRefused(found)

    async def _deleted(self, project_id: str) -> bool:
        statement = sa.select(deleted_project_table.c.project_id).where(
            deleted_project_table.c.project_id == project_id
        )
        async with self._reader.connect() as reader:
            return (await reader.execute(statement)).first() is not None

    async def events_by_idempotency_key(
        self, session_id: str, project_id: str, keys: Sequence[str]
    ) -> dict[str, Event]:
        async with self._reader.connect() as connection:
            return await events_by_key(connection, session_id, project_id, keys)

    # --- reading -----------------------------------------------------------------------------

    async def get_session(self, session_id: str, project_id: str) -> Session | None:
        query = sa.select(*SESSION_COLUMNS).where(
            session_table.c.project_id == project_id, session_table.c.id == session_id
        )
        async with self._reader.connect() as connection:
            row = (await connection.execute(query)).first()
        return session_row(row) if row is not None else None

    async def sessions_with_id(self, session_id: str, *, limit: int) -> list[Session]:
        query = (
            sa.select(*SESSION_COLUMNS)
            .where(session_table.c.id == session_id)
            .order_by(session_table.c.project_id)
            .limit(limit)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [session_row(row) for row in rows]

    async def list_events(self, query: EventQuery, *, after: EventCursor | None, limit: int) -> list[Event]:
        c = event_table.c
        key = (c.seq,) if query.session_id else (c.created_at, c.session_id, c.seq)
        conditions = event_conditions(query)
        if after is not None:
            position = key[0] if len(key) == 1 else sa.tuple_(*key)
            value = (
                after[0]
                if len(key) == 1
                else sa.tuple_(*(sa.literal(v, k.type) for v, k in zip(after, key, strict=True)))
            )
            conditions.append(position < value if query.descending else position > value)
        order = [column.desc() for column in key] if query.descending else list(key)
        statement = sa.select(*EVENT_COLUMNS).where(*conditions).order_by(*order).limit(limit)
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [event_row(row) for row in rows]

    async def count_events(self, query: EventQuery) -> int:
        statement = sa.select(sa.func.count()).select_from(event_table).where(*event_conditions(query))
        async with self._reader.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]:
        c = session_table.c
        statement = sa.select(*SESSION_COLUMNS).where(c.project_id == project_id)
        if after is not None:
            statement = statement.where(
                sa.tuple_(c.updated_at, c.id)
                < sa.tuple_(sa.literal(after[0], TIME), sa.literal(after[1], ID))
            )
        statement = statement.order_by(c.updated_at.desc(), c.id.desc()).limit(limit)
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [session_row(row) for row in rows]

    async def stored_bytes(self, project_id: str) -> int:
        # A sum over the project's sessions, read through the (project_id, …) index: its cost
        # grows with the project's sessions, not its events.
        statement = sa.select(sa.func.coalesce(sa.func.sum(session_table.c.stored_bytes), 0)).where(
            session_table.c.project_id == project_id
        )
        async with self._reader.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

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
        return None if row is None else (utc(row[0]), row[1])

    async def create_session(self, session: Session) -> bool:
        values = session.model_dump(exclude={"lineage"})
        values["lineage"] = [list(segment) for segment in session.lineage] or None
        try:
            async with self._write() as connection:
                await connection.execute(sa.insert(session_table).values(**values))
        except IntegrityError:
            return False
        return True

    async def reset_context(self, session_id: str, project_id: str) -> Session | None:
        c = session_table.c
        statement = (
            sa.update(session_table)
            .where(c.project_id == project_id, c.id == session_id)
            .values(context_start_seq=c.last_seq)
        )
        async with self._write() as connection:
            await connection.execute(statement)
        return await self.get_session(session_id, project_id)
