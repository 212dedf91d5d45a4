"""A2A push notification configs: a webhook bound to one task (its run), with the A2A client's
token and authentication, delivered from the same outbox as a project's webhooks.

Expand only: new columns with defaults (a project's webhooks keep them empty).

Revision ID: 0023_task_push_configs
Revises: 0022_webhooks
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_task_push_configs"
down_revision = "0022_webhooks"
branch_labels = None
depends_on = None

COLUMNS = ("run_id", "push_config_id", "task_id", "token", "auth_scheme", "auth_credentials")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("webhooks", sa.Column(name, sa.Text(), nullable=False, server_default=""))
    op.create_index("ix_webhooks_run_id", "webhooks", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_webhooks_run_id", table_name="webhooks")
    for name in reversed(COLUMNS):
        op.drop_column("webhooks", name)
