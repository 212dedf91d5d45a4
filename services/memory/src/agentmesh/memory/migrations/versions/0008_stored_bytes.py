"""Stored bytes: each event's size as counted against its project's `stored_bytes` limit, and each
session's sum of them (docs/tenants.md#stored-bytes).

An append adds its events' sizes to its session's `stored_bytes` in the statement (or transaction)
that bumps `last_seq`; retention subtracts the sizes of the events it removes, read from the
events' own `stored_bytes`, so the two never disagree. A project's count is the sum over its
sessions. Expand-only: two columns with a default, no rewrite of existing rows. Events stored
before this revision count 0 (and subtract 0 when removed), so a project's count starts with what
it stores from now on.

Revision ID: 0008_stored_bytes
Revises: 0007_owners_from_the_registry
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_stored_bytes"
down_revision = "0007_owners_from_the_registry"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "memory_sessions", sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0")
    )
    op.add_column(
        "memory_events", sa.Column("stored_bytes", sa.BigInteger, nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("memory_events") as batch:
        batch.drop_column("stored_bytes")
    with op.batch_alter_table("memory_sessions") as batch:
        batch.drop_column("stored_bytes")
