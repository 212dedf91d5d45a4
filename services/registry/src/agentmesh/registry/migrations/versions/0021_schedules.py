"""Schedules: a project's agent run on a cron expression, and each due time's firing. A firing
is unique by (schedule, due time): the backstop of the conditional update that claims it.

Revision ID: 0021_schedules
Revises: 0020_sessions
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_schedules"
down_revision: str | None = "0020_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("session_policy", sa.String(16), nullable=False),
        sa.Column("missed_policy", sa.String(16), nullable=False),
        sa.Column("overlap_policy", sa.String(16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("created_by", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
        sa.UniqueConstraint("project_id", "name", name="uq_schedules_project_id_name"),
    )
    op.create_index("ix_schedules_project_id_created_at_id", "schedules", ["project_id", "created_at", "id"])
    op.create_index("ix_schedules_next_fire_at", "schedules", ["next_fire_at"])
    op.create_table(
        "schedule_firings",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("schedule_id", sa.String(36), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_schedule_firings"),
        sa.UniqueConstraint("schedule_id", "due_at", name="uq_schedule_firings_schedule_id_due_at"),
    )
    op.create_index("ix_schedule_firings_outcome", "schedule_firings", ["outcome"])


def downgrade() -> None:
    op.drop_index("ix_schedule_firings_outcome", "schedule_firings")
    op.drop_table("schedule_firings")
    op.drop_index("ix_schedules_next_fire_at", "schedules")
    op.drop_index("ix_schedules_project_id_created_at_id", "schedules")
    op.drop_table("schedules")
