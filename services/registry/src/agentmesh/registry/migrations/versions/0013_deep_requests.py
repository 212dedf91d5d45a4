"""Deep requests: a run parked while a run it delegated to (or started as a sub-agent) waits for
a person — one row per run waited on, removed when that run ends; the parked run is handed out
once none is left.

Revision ID: 0013_deep_requests
Revises: 0012_project_limits
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_deep_requests"
down_revision: str | None = "0012_project_limits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_waits",
        sa.Column(
            "agent_id", sa.String(36), sa.ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("child_run_id", sa.String(200), primary_key=True),
    )
    op.create_index("ix_run_waits_child", "run_waits", ["child_run_id"])


def downgrade() -> None:
    op.drop_table("run_waits")
