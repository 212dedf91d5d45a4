"""The instructions an agent type's compaction model summarizes older turns with.

Every existing type gets none (the executor's built-in instructions), so nothing changes for it.

Revision ID: 0020_sessions
Revises: 0017_agent_versions
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_sessions"
down_revision = "0019_agent_public"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.add_column(sa.Column("compaction_prompt", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.drop_column("compaction_prompt")
