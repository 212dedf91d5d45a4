"""Session turns (double texting) on the SQL store, part of `SqlRunLeaseStore` (and in memory,
part of `InMemoryRunLeaseStore`). A turn is in
flight while its run's `agent_runs` row exists, so nothing has to forget a turn when its run
ends; rows of ended turns are swept when their session takes its next turn. Taking a turn is
serialized per session: on PostgreSQL by a transaction-scoped advisory lock on the session (two
registry replicas may take turns of one session at the same moment), on SQLite by `BEGIN
IMMEDIATE`.

On PostgreSQL a turn is one call, in autocommit, of the function `agentmesh_take_turn` (migration
0010): it takes the lock, then does the rest in one statement — the run's own turn when it has one
(a retried start, a resumed run); the turns in flight ahead of it; for a new turn, the sweep of
the session's ended turns and the insert (unless `reject` and any are ahead); the ahead ones
marked interrupted under `interrupt`. The parts see one snapshot (the sweep and the mark touch
disjoint rows: ended ones, in-flight ones), taken after the lock was granted, so it sees every
turn taken before it. It runs on every chat: as a transaction (BEGIN, the lock, the statement,
COMMIT) it took four round trips and cost the registry twice what the run's start does."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.in_memory_state import SessionTurn, State
from agentmesh.registry.models import RunKey
from agentmesh.registry.tables import AgentRunRow, SessionTurnRow

_RUNS = AgentRunRow.__table__
_TURNS = SessionTurnRow.__table__
_IN_FLIGHT = sa.exists().where(_RUNS.c.agent_id == _TURNS.c.agent_id, _RUNS.c.run_id == _TURNS.c.run_id)

_TAKE_TURN = sa.text(
    "SELECT ahead_agent_id, ahead_run_id "
    "FROM agentmesh_take_turn(:session_id, :agent_id, :run_id, :reject, :interrupt)"
).bindparams(sa.bindparam("reject", type_=sa.Boolean), sa.bindparam("interrupt", type_=sa.Boolean))


class SqlSessionTurns:
    """The session-turn half of `RunLeaseStore` on the registry's SQL engine."""

    _engine: AsyncEngine
    _autocommit: AsyncEngine  # PostgreSQL: a turn is one call of its own (no BEGIN, no COMMIT)
    _lease_engine: AsyncEngine  # what lease renewals use (`interrupted` is part of one)
    _postgres: bool

    async def take_turn(
        self, session_id: str, run: RunKey, *, reject: bool = False, interrupt: bool = False
    ) -> list[RunKey]:
        agent_id, run_id = run
        if self._postgres:
            async with self._autocommit.connect() as connection:
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
                return [(row.ahead_agent_id, row.ahead_run_id) for row in rows]
        async with self._engine.begin() as connection:
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


class InMemorySessionTurns:
    """The session-turn half of `RunLeaseStore` on the in-memory store's state (see
    `InMemoryRunLeaseStore`): the turns in the order they were taken."""

    _draft: Callable[[], AbstractAsyncContextManager[State]]
    _current: Callable[[], State]

    async def take_turn(
        self, session_id: str, run: RunKey, *, reject: bool = False, interrupt: bool = False
    ) -> list[RunKey]:
        async with self._draft() as state:
            mine = next((turn for turn in state.turns if turn.run == run), None)
            if mine is None:
                state.turns = [t for t in state.turns if t.session_id != session_id or state.in_flight(t.run)]
            ahead = _turns_ahead(state, session_id, mine)
            if mine is None:
                if reject and ahead:
                    return ahead
                state.turns.append(SessionTurn(session_id, run))
            if interrupt:
                state.turns = [
                    dataclasses.replace(turn, interrupted=True) if turn.run in ahead else turn
                    for turn in state.turns
                ]
        return ahead

    async def turns_ahead(self, run: RunKey) -> list[RunKey]:
        state = self._current()
        mine = next((turn for turn in state.turns if turn.run == run), None)
        return [] if mine is None else _turns_ahead(state, mine.session_id, mine)

    async def interrupted(self, executor_id: str) -> list[RunKey]:
        state = self._current()
        return [
            turn.run
            for turn in state.turns
            if turn.interrupted
            and state.in_flight(turn.run)
            and (lease := state.leases.get(turn.run)) is not None
            and lease.executor_id == executor_id
        ]


def _turns_ahead(state: State, session_id: str, mine: SessionTurn | None) -> list[RunKey]:
    turns = state.turns[: state.turns.index(mine)] if mine is not None else state.turns
    return [t.run for t in turns if t.session_id == session_id and state.in_flight(t.run)]
