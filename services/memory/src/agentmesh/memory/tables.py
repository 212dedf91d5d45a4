"""The memory service's tables and the hand-written statements of an append, for the SQL store
(`store.SqlEventStore`; its docstring says how an append keeps `seq` gap-free). The migrations
build this schema."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

metadata = sa.MetaData()

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(255)
TIME = sa.DateTime(timezone=True)

# A session is its project's: its id is the client's and unique only within the project, so two
# projects never collide on one (migration 0002_project_sessions).
session_table = sa.Table(
    "memory_sessions",
    metadata,
    sa.Column("id", ID, nullable=False),
    sa.Column("project_id", ID, nullable=False),
    sa.Column("agent", ID, nullable=False),
    sa.Column("created_at", TIME, nullable=False),
    sa.Column("updated_at", TIME, nullable=False),
    sa.Column("last_seq", sa.BigInteger, nullable=False),
    sa.Column("first_seq", sa.BigInteger, nullable=False),
    # Where its agents' context starts (ResetSessionContext; migration 0003_session_context).
    sa.Column("context_start_seq", sa.BigInteger, nullable=False, server_default="0"),
    # A fork's source and the seq it was forked at, and the sessions its inherited events are read
    # from (Session.lineage, as [[session_id, up_to_seq], ...]; NULL for a session of its own).
    # Migration 0006_session_forks.
    sa.Column("forked_from_session_id", ID, nullable=False, server_default=""),
    sa.Column("forked_at_seq", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("lineage", JSON, nullable=True),
    # The sum of its events' `stored_bytes`: what it counts against its project's `stored_bytes`
    # limit (migration 0008_stored_bytes; memory/storage_quota.py).
    sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.PrimaryKeyConstraint("project_id", "id", name="pk_memory_sessions"),
    sa.Index("ix_memory_sessions_project_activity", "project_id", "updated_at", "id"),
    sa.Index("ix_memory_sessions_id", "id"),
)

event_table = sa.Table(
    "memory_events",
    metadata,
    sa.Column("session_id", ID, nullable=False),
    sa.Column("seq", sa.BigInteger, nullable=False, autoincrement=False),
    sa.Column("id", sa.String(36), nullable=False),
    sa.Column("project_id", ID, nullable=False),
    sa.Column("agent", ID, nullable=False),
    sa.Column("event_type", sa.String(32), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("metadata", JSON, nullable=False),
    sa.Column("run_id", ID, nullable=False),
    sa.Column("parent_event_id", ID, nullable=False),
    sa.Column("delegation_id", ID, nullable=False),
    sa.Column("trace_id", sa.String(32), nullable=False),
    sa.Column("span_id", sa.String(16), nullable=False),
    sa.Column("idempotency_key", ID, nullable=True),
    sa.Column("created_at", TIME, nullable=False),
    # Its size as counted (validation.event_bytes), kept so that removing it subtracts exactly
    # what storing it added to its session's `stored_bytes` (migration 0008_stored_bytes).
    sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.PrimaryKeyConstraint("project_id", "session_id", "seq", name="pk_memory_events"),
    sa.ForeignKeyConstraint(
        ["project_id", "session_id"],
        ["memory_sessions.project_id", "memory_sessions.id"],
        name="fk_memory_events_session",
        ondelete="CASCADE",
    ),
    sa.UniqueConstraint("id", name="uq_memory_events_id"),
    # NULL keys (no key given) never collide, in both databases.
    sa.UniqueConstraint(
        "project_id", "session_id", "idempotency_key", name="uq_memory_events_idempotency_key"
    ),
    # An agent's window in a session (the executor's context): newest N by seq, no full scan.
    sa.Index("ix_memory_events_session_agent_seq", "project_id", "session_id", "agent", "seq"),
    # One run's events in a session (a task's, a followed or resumed run's), without a session scan.
    sa.Index("ix_memory_events_session_run_seq", "project_id", "session_id", "run_id", "seq"),
    # One agent's events across a project's sessions, in time order.
    sa.Index("ix_memory_events_project_agent_time", "project_id", "agent", "created_at", "session_id", "seq"),
)

retention_table = sa.Table(
    "memory_retention_policies",
    metadata,
    sa.Column("project_id", ID, primary_key=True),
    sa.Column("max_age_seconds", sa.BigInteger, nullable=False),
    sa.Column("max_events_per_session", sa.BigInteger, nullable=False),
    sa.Column("updated_at", TIME, nullable=False),
)

# Projects deleted in the registry: their sessions are erased and no append may create one again
# (an executor's run in flight, a gateway's remembered grant). Project ids are never reused.
deleted_project_table = sa.Table(
    "memory_deleted_projects",
    metadata,
    sa.Column("project_id", ID, primary_key=True),
    sa.Column("deleted_at", TIME, nullable=False),
)

# Each project's owner, as memory learned it (memory/ownership.py, migration 0004_ownership).
project_owner_table = sa.Table(
    "memory_project_owners",
    metadata,
    sa.Column("project_id", ID, primary_key=True),
    sa.Column("owner_id", ID, nullable=False),
    sa.Column("recorded_at", TIME, nullable=False),
)

EVENT_COLUMNS = (
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
EVENT_FIELDS = tuple(column.key for column in EVENT_COLUMNS)
SESSION_COLUMNS = (
    session_table.c.id,
    session_table.c.project_id,
    session_table.c.agent,
    session_table.c.created_at,
    session_table.c.updated_at,
    session_table.c.last_seq,
    session_table.c.first_seq,
    session_table.c.context_start_seq,
    session_table.c.forked_from_session_id,
    session_table.c.forked_at_seq,
    session_table.c.lineage,
)


# Creates the session or moves its last_seq on by :count (and its stored_bytes by :bytes),
# returning the new last_seq (no row for a deleted project); in PostgreSQL it also locks the
# session row until commit. Text, because SQLAlchemy 2.0 does not cache the compiled form of the
# dialects' INSERT … ON CONFLICT constructs, and this runs on every append.
def _bump_last_seq(*, fenced: bool) -> Any:
    """BUMP_LAST_SEQ, or SQLITE_FENCED_BUMP_LAST_SEQ (below)."""
    return (
        sa.text(
            "INSERT INTO memory_sessions "
            "(id, project_id, agent, created_at, updated_at, last_seq, first_seq, stored_bytes) "
            "SELECT :id, :project_id, :agent, :now, :now, :count, 1, :bytes "
            "WHERE NOT EXISTS (SELECT 1 FROM memory_deleted_projects WHERE project_id = :project_id) "
            "ON CONFLICT (project_id, id) DO UPDATE "
            "SET last_seq = memory_sessions.last_seq + :count, updated_at = :now, "
            "stored_bytes = memory_sessions.stored_bytes + :bytes "
            "WHERE NOT EXISTS (SELECT 1 FROM memory_deleted_projects WHERE project_id = :project_id) "
            + (
                "AND NOT EXISTS (SELECT 1 FROM memory_events WHERE project_id = :project_id "
                "AND session_id = :id AND idempotency_key IN :fence_keys) "
                if fenced
                else ""
            )
            + "RETURNING project_id, last_seq"
        )
        .bindparams(
            sa.bindparam("id", type_=ID),
            sa.bindparam("project_id", type_=ID),
            sa.bindparam("agent", type_=ID),
            sa.bindparam("now", type_=TIME),
            sa.bindparam("count", type_=sa.BigInteger),
            sa.bindparam("bytes", type_=sa.BigInteger),
            *([sa.bindparam("fence_keys", type_=sa.Text, expanding=True)] if fenced else []),
        )
        .columns(project_id=ID, last_seq=sa.BigInteger)
    )


BUMP_LAST_SEQ = _bump_last_seq(fenced=False)
# BUMP_LAST_SEQ that also refuses (no row) when one of :fence_keys (a run's end, fence.py) is in
# the session. SQLite only: its write statement reads the newest data (one writer, and the write
# lock taken for the statement), so the look-up and the bump are one atomic step. PostgreSQL's
# subquery would read a snapshot from before the row lock; there the store looks up after it.
SQLITE_FENCED_BUMP_LAST_SEQ = _bump_last_seq(fenced=True)

# The event columns a one-statement append sends as arrays, one element per event.
EVENT_ARRAYS = (
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
# BUMP_LAST_SEQ refusing, instead of updating, a session of another project or one not at
# :expected; its row lock serializes the writers of a session as in the transaction. A session not
# yet there cannot be at a positive :expected, so it is not created then (a session the snapshot
# misses but a concurrent append creates conflicts, and is checked, as any other). `stored` numbers
# the batch below the new last_seq. Neither happens for a deleted project. No row back: `bump`
# refused, and nothing was written.
#
# The fence (fence.py): with :fence_keys, `bump` also refuses when one of those keys (a run's end)
# is stored. Its subqueries read the statement's snapshot, taken before the row lock was granted:
# an end appended by a writer the statement waited for is not in it. So the check counts only
# when no append went in between — the locked row's last_seq (its newest version) is the one the
# snapshot saw; otherwise it refuses too, and the store decides in a transaction whose reads come
# after the lock (`EventLogStore._append_in_transaction`).
_FENCE_CONDITION = (
    "AND memory_sessions.last_seq = (SELECT s.last_seq FROM memory_sessions s "
    "WHERE s.project_id = CAST(:project_id AS TEXT) AND s.id = CAST(:session_id AS TEXT)) "
    "AND NOT EXISTS (SELECT FROM memory_events e WHERE e.project_id = CAST(:project_id AS TEXT) "
    "AND e.session_id = CAST(:session_id AS TEXT) "
    "AND e.idempotency_key = ANY(CAST(:fence_keys AS TEXT[]))) "
)


_BUMP = (
    "WITH bump AS ("
    "INSERT INTO memory_sessions "
    "(id, project_id, agent, created_at, updated_at, last_seq, first_seq, stored_bytes) "
    "SELECT CAST(:session_id AS TEXT), CAST(:project_id AS TEXT), CAST(:agent AS TEXT), "
    "CAST(:now AS TIMESTAMPTZ), CAST(:now AS TIMESTAMPTZ), CAST(:count AS BIGINT), 1, "
    "CAST(:bytes AS BIGINT) "
    "WHERE (CAST(:expected AS BIGINT) IS NULL OR CAST(:expected AS BIGINT) = 0 "
    "OR EXISTS (SELECT FROM memory_sessions WHERE project_id = CAST(:project_id AS TEXT) "
    "AND id = CAST(:session_id AS TEXT))) "
    "AND NOT EXISTS (SELECT FROM memory_deleted_projects WHERE project_id = CAST(:project_id AS TEXT)) "
    "ON CONFLICT (project_id, id) DO UPDATE "
    "SET last_seq = memory_sessions.last_seq + CAST(:count AS BIGINT), "
    "updated_at = CAST(:now AS TIMESTAMPTZ), "
    "stored_bytes = memory_sessions.stored_bytes + CAST(:bytes AS BIGINT) "
    "WHERE (CAST(:expected AS BIGINT) IS NULL OR memory_sessions.last_seq = CAST(:expected AS BIGINT)) "
    "AND NOT EXISTS (SELECT FROM memory_deleted_projects WHERE project_id = CAST(:project_id AS TEXT)) "
)
_STORE = (
    "RETURNING project_id, last_seq"
    "), stored AS ("
    "INSERT INTO memory_events (session_id, seq, id, project_id, agent, event_type, content, metadata, "
    "run_id, parent_event_id, delegation_id, trace_id, span_id, idempotency_key, created_at, "
    "stored_bytes) "
    "SELECT CAST(:session_id AS TEXT), bump.last_seq - CAST(:count AS BIGINT) + e.position, e.id, "
    "bump.project_id, e.agent, e.event_type, e.content, CAST(e.metadata AS JSONB), e.run_id, "
    "e.parent_event_id, e.delegation_id, e.trace_id, e.span_id, e.idempotency_key, "
    "CAST(:now AS TIMESTAMPTZ), e.size "
    "FROM bump, unnest("
    + ", ".join(f"CAST(:{name}s AS TEXT[])" for name in EVENT_ARRAYS)
    + ", CAST(:sizes AS BIGINT[])) WITH ORDINALITY AS e("
    + ", ".join(EVENT_ARRAYS)
    + ", size, position)"
    ") "
    "SELECT project_id, last_seq FROM bump"
)


def _append_in_one_statement(*, fenced: bool) -> Any:
    """APPEND_IN_ONE_STATEMENT, with the fence's condition or without (an append holding no step
    of a run reads no event)."""
    return (
        sa.text(_BUMP + (_FENCE_CONDITION if fenced else "") + _STORE)
        .bindparams(
            sa.bindparam("session_id", type_=sa.Text),
            sa.bindparam("project_id", type_=sa.Text),
            sa.bindparam("agent", type_=sa.Text),
            sa.bindparam("now", type_=TIME),
            sa.bindparam("count", type_=sa.BigInteger),
            sa.bindparam("expected", type_=sa.BigInteger),
            sa.bindparam("bytes", type_=sa.BigInteger),
            *([sa.bindparam("fence_keys", type_=postgresql.ARRAY(sa.Text))] if fenced else []),
            *(sa.bindparam(f"{name}s", type_=postgresql.ARRAY(sa.Text)) for name in EVENT_ARRAYS),
            sa.bindparam("sizes", type_=postgresql.ARRAY(sa.BigInteger)),
        )
        .columns(project_id=ID, last_seq=sa.BigInteger)
    )


APPEND_IN_ONE_STATEMENT = _append_in_one_statement(fenced=False)
FENCED_APPEND_IN_ONE_STATEMENT = _append_in_one_statement(fenced=True)


def one_statement_append(parameters: dict[str, Any]) -> Any:
    """The one-statement append for these parameters: fenced when they carry `fence_keys`."""
    return FENCED_APPEND_IN_ONE_STATEMENT if parameters.get("fence_keys") else APPEND_IN_ONE_STATEMENT
