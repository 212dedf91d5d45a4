"""What leaves a session's log: the SQL side of retention policies (stored per project, and the
sessions over their bounds found and trimmed, `retention.py` deciding when) and of a deleted
project's erasure. Mixed into `SqlEventStore`, whose connections it uses."""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.memory.models import RetentionPolicy, Session
from agentmesh.memory.rows import session_row, utc
from agentmesh.memory.tables import (
    SESSION_COLUMNS,
    deleted_project_table,
    event_table,
    retention_table,
    session_table,
)


class SqlRetention(abc.ABC):
    """Retention policies, trimming and project erasure on the event store's tables."""

    # The store's autocommit engine for one-statement reads.
    _reader: AsyncEngine

    @abc.abstractmethod
    def _write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction (queued behind this process's other writers on SQLite)."""

    @abc.abstractmethod
    def _upsert(self, table: sa.Table) -> Any:
        """The dialect's INSERT that can say ON CONFLICT."""

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
            sa.select(*SESSION_COLUMNS)
            .where(c.project_id == project_id, c.id > after_id, c.first_seq <= c.last_seq, sa.or_(*reasons))
            .order_by(c.id)
            .limit(limit)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [session_row(row) for row in rows]

    async def expired_prefix_end(
        self, session_id: str, project_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int:
        """The seq after the longest run of events older than `cutoff`, starting at `from_seq` and
        looking at no more than `limit` events (`from_seq` itself when the first is not old)."""
        statement = (
            sa.select(event_table.c.seq, event_table.c.created_at)
            .where(
                event_table.c.project_id == project_id,
                event_table.c.session_id == session_id,
                event_table.c.seq >= from_seq,
            )
            .order_by(event_table.c.seq)
            .limit(limit)
        )
        async with self._reader.connect() as connection:
            rows = (await connection.execute(statement)).all()
        end = from_seq
        for seq, created_at in rows:
            if utc(created_at) >= cutoff:
                break
            end = seq + 1
        return end

    async def trim_session(self, session_id: str, project_id: str, *, first_seq: int) -> int:
        """Removes the session's events below `first_seq` and records that they are gone — its
        first seq moved on, its stored bytes lowered by theirs — in one transaction. Returns how
        many events were removed."""
        c, e = session_table.c, event_table.c
        removed = (e.project_id == project_id, e.session_id == session_id, e.seq < first_seq)
        # The session row first, as appends take it first: the two never wait on each other in
        # opposite orders. The sizes freed are those of the events from the row's own first_seq
        # on: a trim of another replica that moved it first (and that this one waited for) has
        # subtracted those below already.
        freed = (
            sa.select(sa.func.coalesce(sa.func.sum(e.stored_bytes), 0))
            .where(*removed, e.seq >= c.first_seq)
            .scalar_subquery()
        )
        advance = (
            sa.update(session_table)
            .where(
                c.project_id == project_id,
                c.id == session_id,
                c.first_seq < first_seq,
                c.last_seq + 1 >= first_seq,
            )
            .values(first_seq=first_seq, stored_bytes=c.stored_bytes - freed)
        )
        async with self._write() as connection:
            if (await connection.execute(advance)).rowcount == 0:
                return 0
            return (await connection.execute(sa.delete(event_table).where(*removed))).rowcount

    # --- deletion ----------------------------------------------------------------------------

    async def delete_project(self, project_id: str, *, now: datetime) -> int:
        record = (
            self._upsert(deleted_project_table)
            .values(project_id=project_id, deleted_at=now)
            .on_conflict_do_nothing(index_elements=[deleted_project_table.c.project_id])
        )
        async with self._write() as connection:
            # The record first: an append that commits after this transaction finds it.
            await connection.execute(record)
            await connection.execute(sa.delete(event_table).where(event_table.c.project_id == project_id))
            removed = await connection.execute(
                sa.delete(session_table).where(session_table.c.project_id == project_id)
            )
            policy = sa.delete(retention_table).where(retention_table.c.project_id == project_id)
            await connection.execute(policy)
        return removed.rowcount

    async def erase_deleted_projects(self) -> int:
        deleted = sa.select(deleted_project_table.c.project_id)
        async with self._write() as connection:
            await connection.execute(sa.delete(event_table).where(event_table.c.project_id.in_(deleted)))
            removed = await connection.execute(
                sa.delete(session_table).where(session_table.c.project_id.in_(deleted))
            )
        return removed.rowcount
