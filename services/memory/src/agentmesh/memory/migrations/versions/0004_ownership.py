"""Who owns each project, so memory checks ownership itself rather than trusting its caller.

`memory_project_owners` maps a project to the user who owns it, recorded by the first call a
user (not a superuser, not the system) makes in the project — which reaches memory only after the
gateway or an executor checked that user's ownership with the registry. Projects never change
owners in the registry, so a record never goes stale. Existing data holds no owner (events name
no user), so existing projects start unrecorded and take their owner from the first such call.

Revision ID: 0004_ownership
Revises: 0003_session_context
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_ownership"
down_revision = "0003_session_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_project_owners",
        sa.Column("project_id", sa.String(255), primary_key=True),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_project_owners")
