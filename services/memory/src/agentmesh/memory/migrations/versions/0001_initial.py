"""Sessions, their events and per-project retention policies.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.String(255)
_TIME = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "memory_sessions",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("project_id", _ID, nullable=False),
        sa.Column("agent", _ID, nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("first_seq", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_memory_sessions_project_activity", "memory_sessions", ["project_id", "updated_at", "id"]
    )
    op.create_table(
        "memory_events",
        sa.Column(
            "session_id",
            _ID,
            sa.ForeignKey("memory_sessions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
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
        sa.UniqueConstraint("session_id", "idempotency_key", name="uq_memory_events_idempotency_key"),
    )
    op.create_index("ix_memory_events_session_agent_seq", "memory_events", ["session_id", "agent", "seq"])
    op.create_index(
        "ix_memory_events_project_agent_time",
        "memory_events",
        ["project_id", "agent", "created_at", "session_id", "seq"],
    )
    op.create_table(
        "memory_retention_policies",
        sa.Column("project_id", _ID, primary_key=True),
        sa.Column("max_age_seconds", sa.BigInteger, nullable=False),
        sa.Column("max_events_per_session", sa.BigInteger, nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_retention_policies")
    op.drop_index("ix_memory_events_project_agent_time", table_name="memory_events")
    op.drop_index("ix_memory_events_session_agent_seq", table_name="memory_events")
    op.drop_table("memory_events")
    op.drop_index("ix_memory_sessions_project_activity", table_name="memory_sessions")
    op.drop_table("memory_sessions")
