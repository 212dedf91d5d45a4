"""Sessions scoped to their project, and a record of deleted projects.

A session was named by its id alone, so two projects could not use one id, and a project trying
one another used learned that it existed. Now (project_id, id) names it: the keys of sessions and
events, the events' foreign key, their idempotency keys and the session window index all begin
with the project. `memory_deleted_projects` lists the projects whose sessions were erased, so no
late append creates one in them again.

Primary keys cannot be changed in place in SQLite, so both tables are rebuilt the same way on
both databases: the old ones renamed aside (their indexes dropped first, since index names are
global), the new ones created, the rows copied, the old ones dropped. Every existing session
keeps its id, project and events.

Revision ID: 0002_project_sessions
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_project_sessions"
down_revision = "0001"
branch_labels = None
depends_on = None

_ID = sa.String(255)
_TIME = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

_SESSION_COLUMNS = "id, project_id, agent, created_at, updated_at, last_seq, first_seq"
_EVENT_COLUMNS = (
    "session_id, seq, id, project_id, agent, event_type, content, metadata, run_id, parent_event_id, "
    "delegation_id, trace_id, span_id, idempotency_key, created_at"
)


def _session_columns() -> list[sa.Column]:
    return [
        sa.Column("id", _ID, nullable=False),
        sa.Column("project_id", _ID, nullable=False),
        sa.Column("agent", _ID, nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("first_seq", sa.BigInteger, nullable=False),
    ]


def _event_columns() -> list[sa.Column]:
    return [
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False, autoincrement=False),
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
    ]


def _set_aside() -> None:
    """Renames both tables to *_old, dropping the indexes and named constraints whose names the
    new tables take (PostgreSQL names a unique constraint's index in the schema)."""
    op.drop_index("ix_memory_events_project_agent_time", table_name="memory_events")
    op.drop_index("ix_memory_events_session_agent_seq", table_name="memory_events")
    op.drop_index("ix_memory_sessions_project_activity", table_name="memory_sessions")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("uq_memory_events_idempotency_key", "memory_events", type_="unique")
        op.drop_constraint("uq_memory_events_id", "memory_events", type_="unique")
    op.rename_table("memory_events", "memory_events_old")
    op.rename_table("memory_sessions", "memory_sessions_old")


def _copy_and_drop_old() -> None:
    op.execute(
        f"INSERT INTO memory_sessions ({_SESSION_COLUMNS}) SELECT {_SESSION_COLUMNS} FROM memory_sessions_old"
    )
    op.execute(f"INSERT INTO memory_events ({_EVENT_COLUMNS}) SELECT {_EVENT_COLUMNS} FROM memory_events_old")
    op.drop_table("memory_events_old")
    op.drop_table("memory_sessions_old")


def _activity_index() -> None:
    op.create_index(
        "ix_memory_sessions_project_activity", "memory_sessions", ["project_id", "updated_at", "id"]
    )
    op.create_index(
        "ix_memory_events_project_agent_time",
        "memory_events",
        ["project_id", "agent", "created_at", "session_id", "seq"],
    )


def upgrade() -> None:
    _set_aside()
    op.create_table(
        "memory_sessions",
        *_session_columns(),
        sa.PrimaryKeyConstraint("project_id", "id", name="pk_memory_sessions"),
    )
    op.create_table(
        "memory_events",
        *_event_columns(),
        sa.PrimaryKeyConstraint("project_id", "session_id", "seq", name="pk_memory_events"),
        sa.ForeignKeyConstraint(
            ["project_id", "session_id"],
            ["memory_sessions.project_id", "memory_sessions.id"],
            name="fk_memory_events_session",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("id", name="uq_memory_events_id"),
        sa.UniqueConstraint(
            "project_id", "session_id", "idempotency_key", name="uq_memory_events_idempotency_key"
        ),
    )
    _copy_and_drop_old()
    _activity_index()
    op.create_index("ix_memory_sessions_id", "memory_sessions", ["id"])
    op.create_index(
        "ix_memory_events_session_agent_seq", "memory_events", ["project_id", "session_id", "agent", "seq"]
    )
    op.create_table(
        "memory_deleted_projects",
        sa.Column("project_id", _ID, primary_key=True),
        sa.Column("deleted_at", _TIME, nullable=False),
    )


def downgrade() -> None:
    """Back to ids unique across projects: fails (nothing changed) when two projects use one."""
    op.drop_table("memory_deleted_projects")
    op.drop_index("ix_memory_events_session_agent_seq", table_name="memory_events")
    op.drop_index("ix_memory_sessions_id", table_name="memory_sessions")
    _set_aside()
    op.create_table("memory_sessions", *_session_columns(), sa.PrimaryKeyConstraint("id"))
    op.create_table(
        "memory_events",
        *_event_columns(),
        sa.PrimaryKeyConstraint("session_id", "seq"),
        sa.ForeignKeyConstraint(["session_id"], ["memory_sessions.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("id", name="uq_memory_events_id"),
        sa.UniqueConstraint("session_id", "idempotency_key", name="uq_memory_events_idempotency_key"),
    )
    _copy_and_drop_old()
    _activity_index()
    op.create_index("ix_memory_events_session_agent_seq", "memory_events", ["session_id", "agent", "seq"])
