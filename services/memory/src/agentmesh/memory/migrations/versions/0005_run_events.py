"""A run's events found from the run: an index on (project_id, session_id, run_id, seq).

A run's task (A2A GetTask, ListTasks), a delegating run following its child in the log and a
resumed run all read one run's events of a session; without this index each read scans every
event of the session, which grows with the session, not with the run.

Revision ID: 0005_run_events
Revises: 0004_ownership
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0005_run_events"
down_revision = "0004_ownership"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_memory_events_session_run_seq", "memory_events", ["project_id", "session_id", "run_id", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_memory_events_session_run_seq", table_name="memory_events")
