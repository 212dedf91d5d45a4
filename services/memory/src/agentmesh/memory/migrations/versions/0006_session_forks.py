"""Session forks: a fork's source and seq, and the lineage its inherited events are read from.

Every existing session is a session of its own (no source, no lineage), as before.

Revision ID: 0006_session_forks
Revises: 0005_run_events
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_session_forks"
down_revision = "0005_run_events"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("memory_sessions") as table:
        table.add_column(
            sa.Column("forked_from_session_id", sa.String(255), nullable=False, server_default="")
        )
        table.add_column(sa.Column("forked_at_seq", sa.BigInteger, nullable=False, server_default="0"))
        table.add_column(sa.Column("lineage", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_sessions") as table:
        table.drop_column("lineage")
        table.drop_column("forked_at_seq")
        table.drop_column("forked_from_session_id")
