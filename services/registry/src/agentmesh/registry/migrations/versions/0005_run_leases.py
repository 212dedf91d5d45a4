"""Run leases: which executor holds a run, until when, and in which session it records its events;
`orphaned` marks a run whose lease expired and that a live executor still has to close.

Revision ID: 0005_run_leases
Revises: 0003_mcp_servers
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_run_leases"
down_revision: str | None = "0003_mcp_servers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("session_id", sa.String(200), nullable=False, server_default=""))
        batch.add_column(sa.Column("executor_id", sa.String(200), nullable=False, server_default=""))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("orphaned", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_agent_runs_lease_expires_at", "agent_runs", ["lease_expires_at"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_lease_expires_at", table_name="agent_runs")
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("orphaned")
        batch.drop_column("lease_expires_at")
        batch.drop_column("executor_id")
        batch.drop_column("session_id")
