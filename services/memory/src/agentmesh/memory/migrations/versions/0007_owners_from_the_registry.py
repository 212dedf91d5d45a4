"""Owners from the registry: forget every owner recorded so far, so each is learned again.

Until now memory recorded as a project's owner the first user whose call named it, trusting the
service in between; a service acting wrongly before the owner's first call would have been
recorded instead. Memory now asks the registry (ownership.py), so the records made the old way are
dropped and each project's owner is asked of the registry at its next user call. (A memory service
given no registry address records the next caller, as before.) Nothing else changes; the table
stays as it is.

Revision ID: 0007_owners_from_the_registry
Revises: 0006_session_forks
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0007_owners_from_the_registry"
down_revision = "0006_session_forks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM memory_project_owners")


def downgrade() -> None:
    # The dropped records cannot come back; they are learned again either way.
    pass
