"""Initial schema: users, refresh tokens, agent types, projects, agents, runs, executors.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("first_name", sa.String(100), nullable=False),
        sa.Column("last_name", sa.String(100), nullable=False),
        sa.Column("is_superuser", sa.Boolean(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("failed_login_count", sa.Integer(), nullable=False),
        _timestamp("last_failed_login_at", nullable=True),
        _timestamp("locked_until", nullable=True),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("email", name="uq_users_email"),
    )
    op.create_table(
        "refresh_tokens",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.String(36), nullable=False),
        sa.Column("family_id", sa.String(36), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        _timestamp("created_at"),
        _timestamp("expires_at"),
        _timestamp("used_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_refresh_tokens"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_refresh_tokens_user_id_users", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("token_hash", name="uq_refresh_tokens_token_hash"),
    )
    op.create_index("ix_refresh_tokens_user_id", "refresh_tokens", ["user_id"])
    op.create_index("ix_refresh_tokens_family_id", "refresh_tokens", ["family_id"])
    op.create_table(
        "agent_types",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(63), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("expertise", sa.JSON(), nullable=False),
        sa.Column("personality_prompt", sa.Text(), nullable=False),
        sa.Column("primary_model", sa.String(200), nullable=False),
        sa.Column("fallback_models", sa.JSON(), nullable=False),
        sa.Column("model_params", sa.JSON(), nullable=False),
        sa.Column("tools", sa.JSON(), nullable=False),
        sa.Column("mcp_servers", sa.JSON(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("sub_agents", sa.JSON(), nullable=False),
        sa.Column("max_steps", sa.Integer(), nullable=False),
        sa.Column("max_iterations", sa.Integer(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_agent_types"),
        sa.UniqueConstraint("slug", name="uq_agent_types_slug"),
        sa.UniqueConstraint("request_id", name="uq_agent_types_request_id"),
    )
    op.create_index("ix_agent_types_created_at_id", "agent_types", ["created_at", "id"])
    op.create_table(
        "projects",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(63), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("owner_id", sa.String(36), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_projects"),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name="fk_projects_owner_id_users", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("slug", name="uq_projects_slug"),
        sa.UniqueConstraint("owner_id", "request_id", name="uq_projects_owner_id_request_id"),
    )
    op.create_index("ix_projects_created_at_id", "projects", ["created_at", "id"])
    op.create_index("ix_projects_owner_id_created_at_id", "projects", ["owner_id", "created_at", "id"])
    op.create_table(
        "agents",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", sa.String(36), nullable=False),
        sa.Column("agent_type_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("tasks_completed", sa.BigInteger(), nullable=False),
        sa.Column("tokens_used", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("runs_in_flight", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=True),
        _timestamp("created_at"),
        _timestamp("last_activity_at"),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name="fk_agents_project_id_projects", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["agent_type_id"],
            ["agent_types.id"],
            name="fk_agents_agent_type_id_agent_types",
            ondelete="RESTRICT",
        ),
        sa.UniqueConstraint("project_id", "name", name="uq_agents_project_id_name"),
        sa.UniqueConstraint("project_id", "request_id", name="uq_agents_project_id_request_id"),
    )
    op.create_index("ix_agents_agent_type_id", "agents", ["agent_type_id"])
    op.create_index("ix_agents_project_id_created_at_id", "agents", ["project_id", "created_at", "id"])
    op.create_table(
        "agent_runs",
        sa.Column("agent_id", sa.String(36), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        _timestamp("started_at"),
        sa.PrimaryKeyConstraint("agent_id", "run_id", name="pk_agent_runs"),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name="fk_agent_runs_agent_id_agents", ondelete="CASCADE"
        ),
    )
    op.create_table(
        "executors",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("address", sa.String(300), nullable=False),
        _timestamp("heartbeat_at"),
        sa.PrimaryKeyConstraint("id", name="pk_executors"),
    )
    op.create_index("ix_executors_heartbeat_at", "executors", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_table("executors")
    op.drop_table("agent_runs")
    op.drop_table("agents")
    op.drop_table("projects")
    op.drop_table("agent_types")
    op.drop_table("refresh_tokens")
    op.drop_table("users")
