"""The cost ledger: what each run's calls of each model used and cost, as executors report at
the runs' ends (registry usage/), summed by the usage API; and agent types' run budgets.

Revision ID: 0016_usage_ledger
Revises: 0015_context_budget
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_usage_ledger"
down_revision: str | None = "0015_context_budget"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.add_column(sa.Column("run_budget", sa.JSON(), nullable=False, server_default="{}"))
    op.create_table(
        "usage_entries",
        sa.Column("agent_id", sa.String(36), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("cost_known", sa.Boolean(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "run_id", "model", name="pk_usage_entries"),
    )
    op.create_index("ix_usage_entries_project_id_day", "usage_entries", ["project_id", "day"])


def downgrade() -> None:
    op.drop_table("usage_entries")
    with op.batch_alter_table("agent_types") as batch:
        batch.drop_column("run_budget")
