"""Runs parked on runs below them, on the SQL store and in memory (the store part of deep
requests: a delegated run, or a workflow's sub-agent, that waits for a person suspends itself, and
so does every run above it, each waiting on the one it called).

A parked run's links say which runs it waits on; a run that ends removes the links to it
(`release`), and a parked run left with none and no pending request of its own is due at once.
While links are left, its lease time is `WAITING_ON_RUNS` from when it was parked or last
claimed: only an end below hands it out. The suspension and the claim (`input_store.py`,
`lease_store.py`) call these helpers inside their own transactions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.models import RunKey
from agentmesh.registry.runs.input_models import InputRequestState
from agentmesh.registry.tables import AgentRunRow, InputRequestRow, RunWaitRow

_RUNS = AgentRunRow.__table__
_INPUTS = InputRequestRow.__table__
_PENDING = InputRequestState.PENDING.value
_WAITS = RunWaitRow.__table__
# How long a run parked on runs below it waits when nothing below ends: far beyond any
# request's expiry — a run below whose request expires ends (or asks again), and its end, not
# this time, hands the parked run out.
WAITING_ON_RUNS = timedelta(days=3650)


def parked_until(now: datetime, pending_expiry: datetime | None, waits_left: bool) -> datetime:
    """A parked run's lease time: its earliest pending request's expiry; else, while it waits on
    runs below, `WAITING_ON_RUNS` away; else now (it is due)."""
    if pending_expiry is not None:
        return pending_expiry
    return now + WAITING_ON_RUNS if waits_left else now


async def add_waits(connection: AsyncConnection, run: RunKey, child_run_ids: Sequence[str]) -> bool:
    """Links `run` to those of `child_run_ids` still in flight (one ended already is not waited
    on); whether any link of the run is left."""
    if child_run_ids:
        in_flight = {
            row.run_id
            for row in await connection.execute(
                # Locked: a run below that ends meanwhile removes its links (`release`) only
                # once this link is committed, or is seen gone here.
                sa.select(_RUNS.c.run_id).where(_RUNS.c.run_id.in_(list(child_run_ids))).with_for_update()
            )
        }
        linked = set(await _children(connection, run))
        for child in sorted(in_flight - linked):
            await connection.execute(
                sa.insert(_WAITS).values(agent_id=run[0], run_id=run[1], child_run_id=child)
            )
    return await waits_left(connection, run)


async def waits_left(connection: AsyncConnection, run: RunKey) -> bool:
    return bool(await _children(connection, run))


async def release(
    engine: AsyncEngine, write_engine: AsyncEngine, run_ids: Sequence[str], now: datetime
) -> int:
    """Removes the links to these runs (they ended); each parked run left with no link and no
    pending request is due at once. How many became due. A read first: most runs that end are
    waited on by nobody, and their end should cost no write."""
    if not run_ids:
        return 0
    waited_on = _WAITS.c.child_run_id.in_(list(run_ids))
    async with engine.connect() as connection:
        if (await connection.execute(sa.select(_WAITS.c.run_id).where(waited_on).limit(1))).first() is None:
            return 0
    async with write_engine.begin() as connection:
        return await release_on(connection, run_ids, now)


async def release_on(connection: AsyncConnection, run_ids: Sequence[str], now: datetime) -> int:
    """`release` in the caller's transaction (a closed orphan's, whose row goes with it)."""
    waited_on = _WAITS.c.child_run_id.in_(list(run_ids))
    parents = {
        (row.agent_id, row.run_id)
        for row in await connection.execute(sa.select(_WAITS.c.agent_id, _WAITS.c.run_id).where(waited_on))
    }
    if not parents:
        return 0
    await connection.execute(sa.delete(_WAITS).where(waited_on))
    due = 0
    for parent in sorted(parents):
        if await waits_left(connection, parent) or await _asks(connection, parent):
            continue
        changed = await connection.execute(
            sa.update(_RUNS)
            .where(_RUNS.c.agent_id == parent[0], _RUNS.c.run_id == parent[1], _RUNS.c.suspended)
            .values(lease_expires_at=now)
        )
        due += changed.rowcount
    return due


async def _asks(connection: AsyncConnection, run: RunKey) -> bool:
    """Whether the run has a request of its own still pending."""
    pending = sa.select(_INPUTS.c.id).where(
        _INPUTS.c.agent_id == run[0], _INPUTS.c.run_id == run[1], _INPUTS.c.state == _PENDING
    )
    return (await connection.execute(pending.limit(1))).first() is not None


async def asked_below(connection: AsyncConnection, run_ids: Sequence[str]) -> str | None:
    """The oldest request still pending in the runs a parked run waits on (`run_ids`) or below
    them: what a person is asked on its behalf. None when nothing below asks."""
    level, seen = list(run_ids), set(run_ids)
    while level:
        asked = (
            await connection.execute(
                sa.select(_INPUTS.c.id)
                .where(_INPUTS.c.run_id.in_(level), _INPUTS.c.state == _PENDING)
                .order_by(_INPUTS.c.created_at, _INPUTS.c.id)
                .limit(1)
            )
        ).first()
        if asked is not None:
            return str(asked.id)
        rows = await connection.execute(sa.select(_WAITS.c.child_run_id).where(_WAITS.c.run_id.in_(level)))
        level = [row.child_run_id for row in rows if row.child_run_id not in seen]
        seen.update(level)
    return None


async def children_of(connection: AsyncConnection, run: RunKey) -> list[str]:
    """The runs below `run` it waits on."""
    return await _children(connection, run)


async def waited_on_by(connection: AsyncConnection, run_id: str) -> RunKey | None:
    """The parked run that waits on `run_id`, if one does."""
    row = (
        await connection.execute(
            sa.select(_WAITS.c.agent_id, _WAITS.c.run_id).where(_WAITS.c.child_run_id == run_id).limit(1)
        )
    ).first()
    return None if row is None else (row.agent_id, row.run_id)


async def _children(connection: AsyncConnection, run: RunKey) -> list[str]:
    rows = await connection.execute(
        sa.select(_WAITS.c.child_run_id).where(_WAITS.c.agent_id == run[0], _WAITS.c.run_id == run[1])
    )
    return [row.child_run_id for row in rows]


# --- In memory ------------------------------------------------------------------------------------


def add_waits_in(state: State, run: RunKey, child_run_ids: Sequence[str]) -> bool:
    """`add_waits` on the in-memory state."""
    in_flight = {run_id for _, run_id in state.runs} | {run_id for _, run_id in state.leases}
    children = state.run_waits.get(run, frozenset()) | (set(child_run_ids) & in_flight)
    if children:
        state.run_waits[run] = frozenset(children)
    return bool(children)


def asked_below_in(state: State, run_ids: Sequence[str]) -> str | None:
    """`asked_below` on the in-memory state."""
    level, seen = set(run_ids), set(run_ids)
    while level:
        pending = [
            r
            for r in state.input_requests.values()
            if r.run_id in level and r.state is InputRequestState.PENDING
        ]
        if pending:
            return min(pending, key=lambda r: (r.created_at, r.id)).id
        level = {
            child
            for (_, run_id), children in state.run_waits.items()
            if run_id in level
            for child in children
        }
        level -= seen
        seen |= level
    return None


def release_in(state: State, run_ids: Sequence[str]) -> list[RunKey]:
    """`release`'s link removal on the in-memory state: the parked runs left with no link."""
    ended = set(run_ids)
    freed = []
    for parent, children in list(state.run_waits.items()):
        if not children & ended:
            continue
        left = children - ended
        if left:
            state.run_waits[parent] = left
        else:
            del state.run_waits[parent]
            freed.append(parent)
    return freed
