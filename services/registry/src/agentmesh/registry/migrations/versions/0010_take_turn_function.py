"""Taking a session's turn in one round trip on PostgreSQL: a function that takes the
session's advisory lock and then does the rest of the turn in one statement, so a chat's turn is
one call in autocommit instead of a transaction of four round trips (BEGIN, the lock, the turn,
COMMIT). It must be a function, not one statement: the turn's snapshot has to be taken after the
lock was granted, and a VOLATILE function's statements each take a fresh snapshot, where the
parts of one statement share the snapshot taken before it waited. SQLite has no functions and
needs none (its turns are taken in process under `BEGIN IMMEDIATE`).

What the statement does is `runs/turn_store.py`'s to explain; the lock's key is the one an older
registry took in its own transaction, so replicas of both versions serialize each other's turns.

Revision ID: 0010_take_turn_function
Revises: 0009_executor_capabilities
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010_take_turn_function"
down_revision: str | None = "0009_executor_capabilities"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TAKE_TURN = """
CREATE FUNCTION agentmesh_take_turn(
    p_session_id text, p_agent_id text, p_run_id text, p_reject boolean, p_interrupt boolean
) RETURNS TABLE (ahead_agent_id text, ahead_run_id text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('turns:' || p_session_id));
    RETURN QUERY
    WITH mine AS (SELECT t.position FROM session_turns t WHERE t.run_id = p_run_id),
    ahead AS (
        SELECT t.agent_id, t.run_id, t.position FROM session_turns t
        WHERE t.session_id = p_session_id AND t.run_id <> p_run_id
          AND EXISTS (SELECT FROM agent_runs r WHERE r.agent_id = t.agent_id AND r.run_id = t.run_id)
          AND (NOT EXISTS (SELECT FROM mine) OR t.position < (SELECT m.position FROM mine m))
    ),
    swept AS (
        DELETE FROM session_turns t
        WHERE t.session_id = p_session_id AND NOT EXISTS (SELECT FROM mine)
          AND NOT EXISTS (SELECT FROM agent_runs r WHERE r.agent_id = t.agent_id AND r.run_id = t.run_id)
    ),
    taken AS (
        INSERT INTO session_turns (session_id, agent_id, run_id)
        SELECT p_session_id, p_agent_id, p_run_id
        WHERE NOT EXISTS (SELECT FROM mine) AND NOT (p_reject AND EXISTS (SELECT FROM ahead))
    ),
    marked AS (
        UPDATE session_turns SET interrupted = true
        WHERE p_interrupt AND session_turns.run_id IN (SELECT a.run_id FROM ahead a)
    )
    SELECT a.agent_id::text, a.run_id::text FROM ahead a ORDER BY a.position;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_TAKE_TURN)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION agentmesh_take_turn(text, text, text, boolean, boolean)")
