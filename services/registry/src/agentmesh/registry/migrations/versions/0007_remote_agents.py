"""Remote A2A agents: a project's agents may delegate to them; the credential is a
write-only secret.

Revision ID: 0007_remote_agents
Revises: 0006_api_keys
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_remote_agents"
down_revision: str | None = "0006_api_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "remote_agents",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("card_url", sa.Text(), nullable=False),
        sa.Column("credential", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_remote_agents"),
        sa.UniqueConstraint("project_id", "name", name="uq_remote_agents_project_id_name"),
    )
    op.create_index(
        "ix_remote_agents_project_id_created_at_id", "remote_agents", ["project_id", "created_at", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_remote_agents_project_id_created_at_id", "remote_agents")
    op.drop_table("remote_agents")
