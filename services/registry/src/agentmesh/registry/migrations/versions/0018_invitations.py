"""Invitations and sign-in throttling by address: `invitations` holds the single-use invitations a
superuser issues while registration is invite-only (only their tokens' SHA-256); failed sign-ins
move from the user row to `sign_in_failures`, counted per account and client address and per
address across accounts (registry identity/sign_in_throttle.py). The users' own counters are no
longer read but stay, the count defaulting to 0 for the rows this release's registry inserts:
release 0.3.0's registry still writes them while an upgrade rolls (expand/contract,
docs/upgrades.md; `tables.RETIRED_COLUMNS`). A migration of a release after 0.4.0 drops them.

Revision ID: 0018_invitations
Revises: 0017_agent_versions
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_invitations"
down_revision: str | None = "0017_agent_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "invitations",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_by", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_invitations"),
        sa.UniqueConstraint("token_hash", name="uq_invitations_token_hash"),
    )
    op.create_index("ix_invitations_created_at_id", "invitations", ["created_at", "id"])
    op.create_table(
        "sign_in_failures",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("failed_count", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_sign_in_failures"),
    )
    op.create_index("ix_sign_in_failures_last_failed_at", "sign_in_failures", ["last_failed_at"])
    with op.batch_alter_table("users") as batch:
        batch.alter_column("failed_login_count", existing_type=sa.Integer(), server_default="0")


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.alter_column("failed_login_count", existing_type=sa.Integer(), server_default=None)
    op.drop_table("sign_in_failures")
    op.drop_table("invitations")
