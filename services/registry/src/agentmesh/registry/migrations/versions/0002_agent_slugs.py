"""Agent names as people write them: `agents.name` becomes display text (up to 100 characters)
and every agent gets a `slug`, a DNS label unique in its project. Existing agents keep working:
their names were DNS labels already, so each one's slug is its name.

Revision ID: 0002_agent_slugs
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_agent_slugs"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Batch mode: SQLite alters a table by copying it (no ALTER COLUMN); PostgreSQL alters in place.
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("slug", sa.String(63), nullable=True))
    op.execute("UPDATE agents SET slug = name")
    with op.batch_alter_table("agents") as batch:
        batch.alter_column("slug", existing_type=sa.String(63), nullable=False)
        batch.alter_column("name", existing_type=sa.String(63), type_=sa.String(100), existing_nullable=False)
        batch.create_unique_constraint("uq_agents_project_id_slug", ["project_id", "slug"])


def downgrade() -> None:
    # PostgreSQL refuses to go back while a name is longer than 63 characters (nothing is cut).
    with op.batch_alter_table("agents") as batch:
        batch.drop_constraint("uq_agents_project_id_slug", type_="unique")
        batch.alter_column("name", existing_type=sa.String(100), type_=sa.String(63), existing_nullable=False)
        batch.drop_column("slug")
