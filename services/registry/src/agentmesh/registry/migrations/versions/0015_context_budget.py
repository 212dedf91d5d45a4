"""An agent type's prompt budget in tokens and the model that summarizes what does not fit.

Every existing type gets 0 (the executor's default for its model) and no compaction model (the
agent's own), so nothing changes for it.

Revision ID: 0015_context_budget
Revises: 0014_delegation_limits
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_context_budget"
down_revision = "0014_delegation_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.add_column(sa.Column("context_budget_tokens", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("compaction_model", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.drop_column("compaction_model")
        batch.drop_column("context_budget_tokens")
