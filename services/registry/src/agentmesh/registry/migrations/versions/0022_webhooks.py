"""Webhooks: a project's subscriptions, and their outbox of run events to deliver.

New tables only: nothing existing changes.

Revision ID: 0022_webhooks
Revises: 0021_schedules
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_webhooks"
down_revision = "0021_schedules"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_webhooks"),
    )
    op.create_index("ix_webhooks_project_id_created_at_id", "webhooks", ["project_id", "created_at", "id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(300), nullable=False),
        sa.Column("webhook_id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(36), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_deliveries"),
    )
    op.create_index(
        "ix_webhook_deliveries_state_next_attempt_at", "webhook_deliveries", ["state", "next_attempt_at"]
    )
    op.create_index(
        "ix_webhook_deliveries_webhook_id_created_at_id",
        "webhook_deliveries",
        ["webhook_id", "created_at", "id"],
    )


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
