"""Session turns (double texting): a user's message's run queued as its session's next turn, in
`position` order; `interrupted` marks a turn a newer message cancels.

Revision ID: 0008_durable
Revises: 0007_remote_agents
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_durable"
down_revision: str | None = "0007_remote_agents"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_turns",
        sa.Column(
            "position",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False, unique=True),
        sa.Column("interrupted", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_session_turns_session_id", "session_turns", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_session_turns_session_id", table_name="session_turns")
    op.drop_table("session_turns")
