"""Project limits: what one project may use of the mesh (requests a minute, runs at once, open
streams, tokens a day, stored bytes), as the limits the project sets itself by name; the rest are
the operator's defaults. Executors say how many runs each takes at once: a project's default
share of runs at once is of the pool's slots. The tokens a project's finished runs used, per
day, for its tokens a day.

Revision ID: 0012_project_limits
Revises: 0011_human_in_the_loop
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_project_limits"
down_revision: str | None = "0011_human_in_the_loop"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("limits", sa.JSON(), nullable=False, server_default="{}"))
    with op.batch_alter_table("executors") as batch:
        batch.add_column(sa.Column("run_slots", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "project_token_days",
        sa.Column(
            "project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("project_token_days")
    with op.batch_alter_table("executors") as batch:
        batch.drop_column("run_slots")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("limits")
