"""A waiting run cancelled: who cancelled it (and why), set on its parked `agent_runs` row until
the executor that takes it over records its end as cancelled and closes it.

Expand only: one new column with a default (no run is cancelled).

Revision ID: 0024_cancelled_waiting_runs
Revises: 0023_task_push_configs
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_cancelled_waiting_runs"
down_revision = "0023_task_push_configs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agent_runs", sa.Column("cancelled_by", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("agent_runs", "cancelled_by")
