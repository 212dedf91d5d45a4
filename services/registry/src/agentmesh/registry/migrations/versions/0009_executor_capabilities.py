"""What each executor offers agents: its function tools and model providers (with what keeps a
provider from answering), so declaring an agent can be checked against the running pool.

Revision ID: 0009_executor_capabilities
Revises: 0008_durable
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_executor_capabilities"
down_revision: str | None = "0008_durable"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("executors") as batch:
        batch.add_column(sa.Column("tools", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("model_providers", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("executors") as batch:
        batch.drop_column("model_providers")
        batch.drop_column("tools")
