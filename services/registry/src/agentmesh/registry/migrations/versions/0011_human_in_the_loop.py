"""A person in the loop: tool permissions on agent types and projects (an agent's own are in its
config), how long a request for input waits, the requests themselves, and suspended runs (a run
row parked with no executor until its requests are answered or expire; the agent counts its
waiting runs to show `waiting`).

Revision ID: 0011_human_in_the_loop
Revises: 0010_take_turn_function
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_human_in_the_loop"
down_revision: str | None = "0010_take_turn_function"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agent_types") as batch:
        batch.add_column(sa.Column("tool_permissions", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(sa.Column("input_expiry_seconds", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("tool_permissions", sa.JSON(), nullable=False, server_default="{}"))
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("runs_waiting", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("suspended", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        "input_requests",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("agent_id", sa.String(36), sa.ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        # The request as raised (agentmesh.common.v1.InputRequest in JSON, without its state
        # and response) and its one response (InputResponse in JSON; null while pending).
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_input_requests_project_state", "input_requests", ["project_id", "state", "created_at"]
    )
    op.create_index("ix_input_requests_run", "input_requests", ["agent_id", "run_id"])
    op.create_index("ix_input_requests_pending_expiry", "input_requests", ["state", "expires_at"])


def downgrade() -> None:
    op.drop_table("input_requests")
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("suspended")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("runs_waiting")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("tool_permissions")
    with op.batch_alter_table("agent_types") as batch:
        batch.drop_column("input_expiry_seconds")
        batch.drop_column("tool_permissions")
