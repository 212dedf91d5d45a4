"""Session turns (double texting) on the SQL store, part of `SqlRunLeaseStore`. A turn is in
flight while its run's `agent_runs` row exists, so nothing has to forget a turn when its run
ends; rows of ended turns are swept when their session takes its next turn. Taking a turn is
serialized per session: on PostgreSQL by a transaction-scoped advisory lock on the session (two
registry replicas may take turns of one session at the same moment), on SQLite by `BEGIN
IMMEDIATE`.

On PostgreSQL a turn is two statements: the lock, then one statement that does the rest
(`_TAKE_TURN`) — it runs on every chat, and its five statements cost the registry twice what the
run's start does (docs/performance.md). The second statement's snapshot is taken after the lock
was granted, so it sees every turn taken before it."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.store.interface import RunKey
from agentmesh.registry.store.tables import AgentRunRow, SessionTurnRow

_RUNS = AgentRunRow.__table__
_TURNS = SessionTurnRow.__table__
_IN_FLIGHT = sa.exists().where(_RUNS.c.agent_id == _TURNS.c.agent_id, _RUNS.c.run_id == _TURNS.c.run_id)

# What `take_turn` does after the lock, on PostgreSQL, in one statement: the run's own turn when
# it has one (a retried start, a resumed run); the turns in flight ahead of it; for a new turn,
# the sweep of the session's ended turns and the insert (unless `reject` and any are ahead); the
# ahead ones marked interrupted under `interrupt`. The parts see one snapshot: the sweep and the
# mark touch disjoint rows (ended ones, in-flight ones).
_TAKE_TURN = sa.text(
    """
    WITH mine AS (SELECT position FROM session_turns WHERE run_id = :run_id),
    ahead AS (
        SELECT t.agent_id, t.run_id, t.position FROM session_turns t
        WHERE t.session_id = :session_id AND t.run_id <> :run_id
          AND EXISTS (SELECT FROM agent_runs r WHERE r.agent_id = t.agent_id AND r.run_id = t.run_id)
          AND (NOT EXISTS (SELECT FROM mine) OR t.position < (SELECT position FROM mine))
    ),
    swept AS (
        DELETE FROM session_turns t
        WHERE t.session_id = :session_id AND NOT EXISTS (SELECT FROM mine)
          AND NOT EXISTS (SELECT FROM agent_runs r WHERE r.agent_id = t.agent_id AND r.run_id = t.run_id)
    ),
    taken AS (
        INSERT INTO session_turns (session_id, agent_id, run_id)
        SELECT :session_id, :agent_id, :run_id
        WHERE NOT EXISTS (SELECT FROM mine) AND NOT (:reject AND EXISTS (SELECT FROM ahead))
    ),
    marked AS (
        UPDATE session_turns SET interrupted = true
        WHERE :interrupt AND run_id IN (SELECT run_id FROM ahead)
    )
    SELECT agent_id, run_id FROM ahead ORDER BY position
    """
).bindparams(sa.bindparam("reject", type_=sa.Boolean), sa.bindparam("interrupt", type_=sa.Boolean))


class SqlSessionTurns:
    """The session-turn half of `RunLeaseStore` on the registry's SQL engine."""

    _engine: AsyncEngine
    _lease_engine: AsyncEngine  # what lease renewals use (`interrupted` is part of one)
    _postgres: bool

    async def take_turn(
        self, session_id: str, run: RunKey, *, reject: bool = False, interrupt: bool = False
    ) -> list[RunKey]:
        agent_id, run_id = run
        async with self._engine.begin() as connection:
            if self._postgres:
                await connection.execute(
                    sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext("turns:" + session_id)))
                )
                rows = await connection.execute(
                    _TAKE_TURN,
                    {
                        "session_id": session_id,
                        "agent_id": agent_id,
                        "run_id": run_id,
                        "reject": reject,
                        "interrupt": interrupt,
                    },
                )
                return [(row.agent_id, row.run_id) for row in rows]
            position = await _position(connection, run_id)
            if position is None:
                await connection.execute(
                    sa.delete(_TURNS).where(_TURNS.c.session_id == session_id, sa.not_(_IN_FLIGHT))
                )
            ahead = await _ahead(connection, session_id, position)
            if position is None:
                if reject and ahead:
                    return ahead
                await connection.execute(
                    sa.insert(_TURNS).values(session_id=session_id, agent_id=agent_id, run_id=run_id)
                )
            if interrupt and ahead:
                await connection.execute(
                    sa.update(_TURNS)
                    .where(_TURNS.c.run_id.in_([key[1] for key in ahead]))
                    .values(interrupted=True)
                )
        return ahead

    async def turns_ahead(self, run: RunKey) -> list[RunKey]:
        async with self._engine.connect() as connection:
            mine = (
                await connection.execute(
                    sa.select(_TURNS.c.session_id, _TURNS.c.position).where(_TURNS.c.run_id == run[1])
                )
            ).first()
            if mine is None:
                return []
            return await _ahead(connection, mine.session_id, mine.position)

    async def interrupted(self, executor_id: str) -> list[RunKey]:
        held = sa.exists().where(
            _RUNS.c.agent_id == _TURNS.c.agent_id,
            _RUNS.c.run_id == _TURNS.c.run_id,
            _RUNS.c.executor_id == executor_id,
        )
        async with self._lease_engine.connect() as connection:
            rows = await connection.execute(
                sa.select(_TURNS.c.agent_id, _TURNS.c.run_id).where(_TURNS.c.interrupted, held)
            )
            return [(row.agent_id, row.run_id) for row in rows]


async def _position(connection: AsyncConnection, run_id: str) -> int | None:
    return (await connection.execute(sa.select(_TURNS.c.position).where(_TURNS.c.run_id == run_id))).scalar()


async def _ahead(connection: AsyncConnection, session_id: str, before: int | None) -> list[RunKey]:
    """The session's turns in flight, oldest first (those before `before`, when given)."""
    query = sa.select(_TURNS.c.agent_id, _TURNS.c.run_id).where(_TURNS.c.session_id == session_id, _IN_FLIGHT)
    if before is not None:
        query = query.where(_TURNS.c.position < before)
    rows = await connection.execute(query.order_by(_TURNS.c.position))
    return [(row.agent_id, row.run_id) for row in rows]
