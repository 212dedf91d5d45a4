"""Bounds on the delegation tree under a chat, per agent type (delegations per model step and per
chat, re-entry into the delegation path); an empty object keeps the executor's defaults.

Revision ID: 0014_delegation_limits
Revises: 0013_deep_requests
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_delegation_limits"
down_revision: str | None = "0013_deep_requests"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.add_column(sa.Column("delegation_limits", sa.JSON(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.drop_column("delegation_limits")
