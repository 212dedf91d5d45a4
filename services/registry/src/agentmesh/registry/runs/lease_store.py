"""Run leases on the SQL store and in memory (the interface is `RunLeaseStore`; the in-memory
half, `InMemoryRunLeaseStore`, is the plain statement of the same contract). Off the chat path: renewals
come batched per executor, expiry and claims from one background sweep, so the ORM's core is
plenty. On PostgreSQL, expiry and claims skip rows another registry replica has locked; on
SQLite every write transaction begins with `BEGIN IMMEDIATE`, which serializes them.

Renewals, expiry and claims use their own small connection pool on PostgreSQL (`lease_engine`):
under a burst of thousands of run starts the main pool's queue is seconds long, and a renewal
waiting behind it — four transactions, each queued again — let leases expire that their
executor was renewing (seen in the 5,000-stream benchmark). And the time a renewal waits for its
connection is added to the lease it sets, so waiting never shortens a lease."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.agents.lifecycle import run_finished, run_resumed, run_unparked
from agentmesh.registry.in_memory_state import State, Stored, StoredLease
from agentmesh.registry.runs.input_store import (
    release_due_in,
    run_requests,
    run_requests_in,
    settle_requests,
    settle_requests_in,
)
from agentmesh.registry.runs.run_waits import parked_until, release_on, waits_left
from agentmesh.registry.runs.turn_store import InMemorySessionTurns, SqlSessionTurns
from agentmesh.registry.store.interface import OrphanedRun, RunKey, RunLeaseStore
from agentmesh.registry.store.statements import FINISH_UPDATE, RESUME_UPDATE, RUN_OUTBOX, UNPARK_UPDATE
from agentmesh.registry.tables import AgentRow, AgentRunRow
from agentmesh.registry.webhooks.models import RunOutcome
from agentmesh.registry.webhooks.store import enqueue_in_memory

_RUNS = AgentRunRow.__table__
_AGENTS = AgentRow.__table__


class SqlRunLeaseStore(SqlSessionTurns, RunLeaseStore):
    """RunLeaseStore on the registry's SQL engine (`write_engine` begins write transactions);
    session turns in `turn_store.py`."""

    def __init__(self, write_engine: AsyncEngine, *, lease_engine: AsyncEngine | None = None) -> None:
        self._engine = write_engine
        self._autocommit = write_engine.execution_options(isolation_level="AUTOCOMMIT")
        self._lease_engine = lease_engine or write_engine
        self._postgres = write_engine.dialect.name == "postgresql"

    async def renew(self, executor_id: str, runs: Sequence[RunKey], expires_at: datetime) -> list[RunKey]:
        if not runs:
            return []
        run_ids = [run_id for _, run_id in runs]
        held = sa.and_(_RUNS.c.executor_id == executor_id, _RUNS.c.run_id.in_(run_ids))
        asked = time.monotonic()
        async with self._lease_engine.begin() as connection:
            expires_at += timedelta(seconds=time.monotonic() - asked)
            rows = await connection.execute(sa.select(_RUNS.c.agent_id, _RUNS.c.run_id).where(held))
            found = {(row.agent_id, row.run_id) for row in rows}
            if found:
                await connection.execute(sa.update(_RUNS).where(held).values(lease_expires_at=expires_at))
        return [run for run in runs if run not in found]

    async def expire(self, now: datetime, *, executor_ids: Collection[str] | None = None) -> int:
        expired = sa.select(_RUNS.c.agent_id, _RUNS.c.run_id).where(
            sa.not_(_RUNS.c.orphaned), _RUNS.c.lease_expires_at < now
        )
        if executor_ids is not None:
            if not executor_ids:
                return 0
            expired = expired.where(_RUNS.c.executor_id.in_(list(executor_ids)))
        async with self._lease_engine.begin() as connection:
            await self._lock_agents(connection, expired)
            rows = list(await connection.execute(self._locked(expired)))
            finish = FINISH_UPDATE[self._engine.dialect.name]
            for row in rows:
                await connection.execute(
                    sa.update(_RUNS)
                    .where(_RUNS.c.agent_id == row.agent_id, _RUNS.c.run_id == row.run_id)
                    .values(orphaned=True, executor_id="", lease_expires_at=now)
                )
                await connection.execute(
                    finish,
                    {"agent_id": row.agent_id, "now": now, "completed": 0, "tokens_used": 0, "cost": 0.0},
                )
        return len(rows)

    async def claim(
        self, executor_id: str, now: datetime, expires_at: datetime, limit: int
    ) -> list[OrphanedRun]:
        if limit <= 0:
            return []
        free = (
            sa.select(
                _RUNS.c.agent_id, _RUNS.c.run_id, _RUNS.c.session_id, _RUNS.c.suspended, _RUNS.c.cancelled_by
            )
            .where(_RUNS.c.orphaned, _RUNS.c.lease_expires_at <= now)
            .order_by(_RUNS.c.lease_expires_at)
            .limit(limit)
        )
        async with self._lease_engine.begin() as connection:
            # Handing out a suspended run changes its agent's books: agents first (`_lock_agents`).
            await self._lock_agents(connection, free.where(_RUNS.c.suspended))
            rows = list(await connection.execute(self._locked(free)))
            claimed = []
            for row in rows:
                this_run = sa.and_(_RUNS.c.agent_id == row.agent_id, _RUNS.c.run_id == row.run_id)
                if row.suspended:
                    run = (row.agent_id, row.run_id)
                    waits_until = await settle_requests(connection, run, now)
                    waiting = await waits_left(connection, run)
                    if waits_until is not None or waiting:  # a request pending, or a run below
                        until = parked_until(now, waits_until, waiting)
                        await connection.execute(
                            sa.update(_RUNS).where(this_run).values(lease_expires_at=until)
                        )
                        continue
                    await connection.execute(
                        UNPARK_UPDATE[self._engine.dialect.name], {"agent_id": row.agent_id, "now": now}
                    )
                await connection.execute(
                    sa.update(_RUNS)
                    .where(this_run)
                    .values(executor_id=executor_id, lease_expires_at=expires_at, suspended=False)
                )
                orphan = await _orphan(
                    connection, row.agent_id, row.run_id, row.session_id, parked=row.suspended
                )
                claimed.append(dataclasses.replace(orphan, cancelled_by=row.cancelled_by))
        return claimed

    async def close(self, executor_id: str, runs: Sequence[RunKey], now: datetime) -> int:
        async with self._lease_engine.begin() as connection:
            gone = []
            for agent_id, run_id in runs:
                deleted = await connection.execute(
                    sa.delete(_RUNS)
                    .where(
                        _RUNS.c.agent_id == agent_id,
                        _RUNS.c.run_id == run_id,
                        _RUNS.c.executor_id == executor_id,
                        _RUNS.c.orphaned,
                    )
                    .returning(_RUNS.c.session_id, _RUNS.c.cancelled_by)
                )
                row = deleted.first()
                if row is None:
                    continue
                gone.append(run_id)
                if row.cancelled_by:  # its taker recorded the cancelled end: the run's one end
                    await connection.execute(
                        RUN_OUTBOX,
                        {
                            "agent_id": agent_id,
                            "run_id": run_id,
                            "now": now,
                            "session_id": row.session_id,
                            **_cancelled_end(),
                        },
                    )
            # A closed run has ended: the runs parked on it wait on it no more.
            return await release_on(connection, gone, now) if gone else 0

    async def resume(
        self, executor_id: str, runs: Sequence[RunKey], now: datetime, expires_at: datetime
    ) -> list[RunKey]:
        if not runs:
            return []
        held = sa.and_(_RUNS.c.executor_id == executor_id, _RUNS.c.run_id.in_([run_id for _, run_id in runs]))
        async with self._engine.begin() as connection:
            await self._lock_agents(connection, sa.select(_RUNS.c.agent_id, _RUNS.c.run_id).where(held))
            select = sa.select(_RUNS.c.agent_id, _RUNS.c.run_id, _RUNS.c.orphaned).where(held)
            rows = list(await connection.execute(select.with_for_update() if self._postgres else select))
            found = {(row.agent_id, row.run_id): row.orphaned for row in rows}
            for (agent_id, run_id), orphaned in found.items():
                if (agent_id, run_id) not in runs:
                    continue  # the same run id under another agent: not named
                await connection.execute(
                    sa.update(_RUNS)
                    .where(_RUNS.c.agent_id == agent_id, _RUNS.c.run_id == run_id)
                    .values(orphaned=False, lease_expires_at=expires_at)
                )
                if orphaned:  # not resumed already (a retry)
                    await connection.execute(RESUME_UPDATE, {"agent_id": agent_id, "now": now})
        return [run for run in runs if run not in found]

    async def _lock_agents(self, connection: AsyncConnection, runs: sa.Select[tuple[str, ...]]) -> None:
        """Locks the agents of these runs (in id order) before any of their run rows, the order in
        which a run's start and finish lock them (agent, then run): taking the run rows first, a
        sweep or a resume deadlocked with a finish on PostgreSQL (found by the PostgreSQL-restart
        fault test, an INTERNAL FinishAgentRuns). SQLite has one writer: nothing to order."""
        if not self._postgres:
            return
        agent_ids = sa.select(runs.subquery().c.agent_id).distinct()
        await connection.execute(
            sa.select(_AGENTS.c.id)
            .where(_AGENTS.c.id.in_(agent_ids))
            .order_by(_AGENTS.c.id)
            .with_for_update()
        )

    def _locked(self, select: sa.Select[tuple[str, ...]]) -> sa.Select[tuple[str, ...]]:
        # Another registry replica sweeping at the same moment takes other rows.
        return select.with_for_update(skip_locked=True) if self._postgres else select


async def _orphan(
    connection: AsyncConnection, agent_id: str, run_id: str, session_id: str, *, parked: bool
) -> OrphanedRun:
    agent = (
        await connection.execute(
            sa.select(_AGENTS.c.project_id, _AGENTS.c.slug).where(_AGENTS.c.id == agent_id)
        )
    ).one()
    return OrphanedRun(
        agent_id=agent_id,
        run_id=run_id,
        session_id=session_id,
        project_id=agent.project_id,
        agent_name=agent.slug,  # what its events are tagged with
        input_requests=tuple(await run_requests(connection, (agent_id, run_id))),
        parked=parked,
    )


class InMemoryRunLeaseStore(InMemorySessionTurns, RunLeaseStore):
    """RunLeaseStore on the in-memory store's state: each change in a `draft` of it (published
    when it ends without an exception), reads on the `current` one; session turns in
    `turn_store.py`."""

    def __init__(
        self,
        *,
        draft: Callable[[], AbstractAsyncContextManager[State]],
        current: Callable[[], State],
    ) -> None:
        self._draft = draft
        self._current = current

    async def renew(self, executor_id: str, runs: Sequence[RunKey], expires_at: datetime) -> list[RunKey]:
        async with self._draft() as state:
            held, lost = _holding(state, executor_id, runs)
            for key in held:
                state.leases[key] = _replace(state.leases[key], expires_at=expires_at)
        return lost

    async def expire(self, now: datetime, *, executor_ids: Collection[str] | None = None) -> int:
        async with self._draft() as state:
            expired = [
                k
                for k, v in state.leases.items()
                if not v.orphaned
                and v.expires_at < now
                and (executor_ids is None or v.executor_id in executor_ids)
            ]
            for key in expired:
                state.leases[key] = _replace(state.leases[key], orphaned=True, executor_id="", expires_at=now)
                state.runs.discard(key)
                _count_run(state, key[0], now, counted_in=False)
        return len(expired)

    async def claim(
        self, executor_id: str, now: datetime, expires_at: datetime, limit: int
    ) -> list[OrphanedRun]:
        claimed = []
        async with self._draft() as state:
            free = [k for k, v in state.leases.items() if v.orphaned and v.expires_at <= now]
            for key in sorted(free, key=lambda k: state.leases[k].expires_at)[: max(limit, 0)]:
                parked = state.leases[key].suspended
                if parked:
                    waits_until = settle_requests_in(state, key, now)
                    waiting = key in state.run_waits
                    if waits_until is not None or waiting:  # a request pending, or a run below
                        until = parked_until(now, waits_until, waiting)
                        state.leases[key] = _replace(state.leases[key], expires_at=until)
                        continue
                    stored = state.agents[key[0]]
                    state.agents[key[0]] = Stored(run_unparked(stored.value, now), stored.request_id)
                lease = state.leases[key] = _replace(
                    state.leases[key], executor_id=executor_id, expires_at=expires_at, suspended=False
                )
                agent = state.agents[key[0]].value
                requests = tuple(run_requests_in(state, key))
                claimed.append(
                    OrphanedRun(
                        key[0],
                        key[1],
                        lease.session_id,
                        agent.project_id,
                        agent.slug,
                        requests,
                        parked=parked,
                        cancelled_by=lease.cancelled_by,
                    )
                )
        return claimed

    async def close(self, executor_id: str, runs: Sequence[RunKey], now: datetime) -> int:
        async with self._draft() as state:
            gone = []
            for key in runs:
                lease = state.leases.get(key)
                if lease is not None and lease.orphaned and lease.executor_id == executor_id:
                    del state.leases[key]
                    gone.append(key[1])
                    if lease.cancelled_by:  # its taker recorded the cancelled end: the run's one end
                        project_id = state.agents[key[0]].value.project_id
                        end = RunOutcome.CANCELLED
                        fields = {"agent_id": key[0], "run_id": key[1], "session_id": lease.session_id}
                        enqueue_in_memory(state, project_id, end.event, key[1], now, data=end.data, **fields)
            return release_due_in(state, gone, now) if gone else 0

    async def resume(
        self, executor_id: str, runs: Sequence[RunKey], now: datetime, expires_at: datetime
    ) -> list[RunKey]:
        async with self._draft() as state:
            held, lost = _holding(state, executor_id, runs)
            for key in held:
                lease = state.leases[key]
                state.leases[key] = _replace(lease, orphaned=False, expires_at=expires_at)
                if lease.orphaned:  # else resumed already (a retry)
                    state.runs.add(key)
                    _count_run(state, key[0], now, counted_in=True)
        return lost


def _cancelled_end() -> dict[str, str]:
    """A cancelled run's end event, as RUN_OUTBOX takes it. Closing an orphan not cancelled
    enqueues nothing: only its taker read how it ended (the log may hold its answer)."""
    return {"event": RunOutcome.CANCELLED.event.value, "data": RunOutcome.CANCELLED.data}


def _holding(state: State, executor_id: str, runs: Sequence[RunKey]) -> tuple[list[RunKey], list[RunKey]]:
    """The runs `executor_id` holds a lease on, and those it does not."""
    held: list[RunKey] = []
    lost: list[RunKey] = []
    for key in runs:
        lease = state.leases.get(key)
        (held if lease is not None and lease.executor_id == executor_id else lost).append(key)
    return held, lost


def _count_run(state: State, agent_id: str, now: datetime, *, counted_in: bool) -> None:
    """The agent's bookkeeping for a run counted in (as a resumed start) or out (as a failed
    finish) by its lease."""
    stored = state.agents[agent_id]
    if counted_in:
        agent = run_resumed(stored.value, now)
    else:
        agent = run_finished(stored.value, now, completed=False, tokens_used=0, cost=0.0)
    state.agents[agent_id] = Stored(agent, stored.request_id)


def _replace(lease: StoredLease, **changes: object) -> StoredLease:
    return dataclasses.replace(lease, **changes)  # type: ignore[arg-type]
