"""An agent's `public` flag: its owner publishes its A2A card (served without credentials) and the
gateway's discovery index lists it. Every existing agent stays private.

Revision ID: 0019_agent_public
Revises: 0017_agent_versions
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_agent_public"
down_revision: str | None = "0018_invitations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("public", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_agents_public_created_at_id", "agents", ["public", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_agents_public_created_at_id", table_name="agents")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("public")
