"""Registered MCP servers: global (project_id '') or one project's, unique by name in that scope.

Revision ID: 0003_mcp_servers
Revises: 0002_agent_slugs
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_mcp_servers"
down_revision: str | None = "0002_agent_slugs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("transport", sa.String(20), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_servers"),
        sa.UniqueConstraint("project_id", "name", name="uq_mcp_servers_project_id_name"),
        sa.UniqueConstraint("request_id", name="uq_mcp_servers_request_id"),
    )
    op.create_index("ix_mcp_servers_created_at_id", "mcp_servers", ["created_at", "id"])
    op.create_index(
        "ix_mcp_servers_project_id_created_at_id", "mcp_servers", ["project_id", "created_at", "id"]
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
