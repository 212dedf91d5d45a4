"""Agent versions: every create and change of an agent or its type snapshots what its runs use
(registry agents/versions.py); a session's runs of an agent keep the version their first ran on.

Revision ID: 0017_agent_versions
Revises: 0016_usage_ledger
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_agent_versions"
down_revision: str | None = "0016_usage_ledger"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_versions",
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("agent_type", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "number", name="pk_agent_versions"),
    )
    op.create_index("ix_agent_versions_project_id", "agent_versions", ["project_id"])
    op.create_table(
        "session_agent_versions",
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "session_id", name="pk_session_agent_versions"),
    )
    op.create_index(
        "ix_session_agent_versions_project_id_session_id",
        "session_agent_versions",
        ["project_id", "session_id"],
    )


def downgrade() -> None:
    op.drop_table("session_agent_versions")
    op.drop_table("agent_versions")
