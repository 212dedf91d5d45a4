"""A session's context start: where its agents' history begins after a reset (ResetSessionContext).

Every existing session starts at 0, its whole history, as before.

Revision ID: 0003_session_context
Revises: 0002_project_sessions
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_session_context"
down_revision = "0002_project_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_sessions") as table:
        table.add_column(sa.Column("context_start_seq", sa.BigInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("memory_sessions") as table:
        table.drop_column("context_start_seq")
