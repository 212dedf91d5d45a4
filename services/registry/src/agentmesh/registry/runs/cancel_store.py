"""Cancelling waiting runs on the SQL store and in memory (the store part of `InputRequests.cancel`
and of terminating an agent).

A cancelled run is a parked run marked `cancelled_by` (who, and why), its pending requests closed
(state `cancelled`, the canceller as their responder), made due like an answered run: the
executor whose renewal claims it records its end as cancelled — the run's one end, in its
session's log — and closes it, which deletes its row (freeing its session's turn) and releases
the runs parked on it (`run_waits.release_on`). A cancel takes the run's whole waiting subtree:
each run below it it waits on is cancelled too, and since a parked run is due only once nothing
below it is left, the ends are recorded bottom up — a run's open delegation is answered from the
run below's cancelled end before the run itself ends. Runs of the subtree still in flight on an
executor are left to end on their own; the run waiting on them then ends cancelled."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.errors import InputRequestNotFound
from agentmesh.registry.in_memory_state import State
from agentmesh.registry.models import RunKey
from agentmesh.registry.runs.input_models import Cancellation, InputRequest, InputRequestState
from agentmesh.registry.runs.run_waits import children_of, waited_on_by
from agentmesh.registry.runs.waiting import as_seen, refusal
from agentmesh.registry.tables import AgentRunRow, InputRequestRow

_RUNS = AgentRunRow.__table__
_INPUTS = InputRequestRow.__table__
_PENDING = InputRequestState.PENDING.value
# Delegations are bounded far below this; a loop in the links must not spin forever.
_MAX_DEPTH = 100
_MAX_RUNS = 1000


def closed(request: InputRequest, cancellation: Cancellation, now: datetime) -> InputRequest:
    return request.model_copy(
        update={"state": InputRequestState.CANCELLED, "response": cancellation.response(now)}
    )


def _request_of(row: Any) -> InputRequest:
    return InputRequest.model_validate({**row.request, "state": row.state, "response": row.response})


class _Subtree:
    """The runs of the subtrees below `roots` still to visit, breadth first, each once."""

    def __init__(self, roots: Sequence[RunKey]) -> None:
        self._frontier = list(roots)
        self._seen: set[str] = set()

    def add(self, runs: Iterable[Any]) -> None:
        self._frontier += [(run[0], run[1]) for run in runs]

    def next(self) -> RunKey | None:
        while self._frontier and len(self._seen) < _MAX_RUNS:
            run = self._frontier.pop(0)
            if run[1] not in self._seen:
                self._seen.add(run[1])
                return run
        return None


# --- SQL -----------------------------------------------------------------------------------------


async def top_of(connection: AsyncConnection, run: RunKey) -> RunKey:
    """The run at the top of the parked runs waiting (transitively) on `run`."""
    for _ in range(_MAX_DEPTH):
        above = await waited_on_by(connection, run[1])
        if above is None:
            return run
        run = above
    return run


async def agent_waiting_runs(connection: AsyncConnection, agent_id: str) -> list[RunKey]:
    rows = await connection.execute(
        sa.select(_RUNS.c.agent_id, _RUNS.c.run_id)
        .where(_RUNS.c.agent_id == agent_id, _RUNS.c.suspended, _RUNS.c.cancelled_by == "")
        .order_by(_RUNS.c.run_id)
    )
    return [(row.agent_id, row.run_id) for row in rows]


async def cancel_trees(
    connection: AsyncConnection, roots: Sequence[RunKey], cancellation: Cancellation, now: datetime
) -> list[RunKey]:
    """Cancels the parked runs of each root's subtree (see the module's docstring), top first;
    the runs it cancelled (one cancelled already is not again)."""
    cancelled: list[RunKey] = []
    tree = _Subtree(roots)
    while (run := tree.next()) is not None:
        this_run = sa.and_(_RUNS.c.agent_id == run[0], _RUNS.c.run_id == run[1])
        row = (
            await connection.execute(
                sa.select(_RUNS.c.suspended, _RUNS.c.cancelled_by).where(this_run).with_for_update()
            )
        ).first()
        if row is None:
            continue
        below = await children_of(connection, run)
        if below:
            tree.add(
                (child.agent_id, child.run_id)
                for child in await connection.execute(
                    sa.select(_RUNS.c.agent_id, _RUNS.c.run_id).where(_RUNS.c.run_id.in_(below))
                )
            )
        if not row.suspended or row.cancelled_by:
            continue
        await connection.execute(
            sa.update(_INPUTS)
            .where(_INPUTS.c.agent_id == run[0], _INPUTS.c.run_id == run[1], _INPUTS.c.state == _PENDING)
            .values(
                state=InputRequestState.CANCELLED.value,
                response=cancellation.response(now).model_dump(mode="json"),
            )
        )
        # Due now unless it waits on runs below: their ends hand it out (`release_on`).
        values: dict[str, object] = {"cancelled_by": cancellation.cancelled_by}
        if not below:
            values["lease_expires_at"] = now
        await connection.execute(sa.update(_RUNS).where(this_run).values(**values))
        cancelled.append(run)
    return cancelled


# --- In memory -----------------------------------------------------------------------------------


def top_in(state: State, run: RunKey) -> RunKey:
    """`top_of` on the in-memory state."""
    for _ in range(_MAX_DEPTH):
        above = next((parent for parent, children in state.run_waits.items() if run[1] in children), None)
        if above is None:
            return run
        run = above
    return run


def agent_waiting_runs_in(state: State, agent_id: str) -> list[RunKey]:
    return sorted(
        key
        for key, lease in state.leases.items()
        if key[0] == agent_id and lease.suspended and not lease.cancelled_by
    )


def cancel_trees_in(
    state: State, roots: Sequence[RunKey], cancellation: Cancellation, now: datetime
) -> list[RunKey]:
    """`cancel_trees` on the in-memory state."""
    cancelled: list[RunKey] = []
    tree = _Subtree(roots)
    while (run := tree.next()) is not None:
        lease = state.leases.get(run)
        if lease is None:
            continue
        below = state.run_waits.get(run, frozenset())
        tree.add(sorted(key for key in state.leases if key[1] in below))
        if not lease.suspended or lease.cancelled_by:
            continue
        for request in list(state.input_requests.values()):
            if (request.agent_id, request.run_id) == run and request.state is InputRequestState.PENDING:
                state.input_requests[request.id] = closed(request, cancellation, now)
        state.leases[run] = dataclasses.replace(
            lease,
            cancelled_by=cancellation.cancelled_by,
            expires_at=lease.expires_at if below else now,
        )
        cancelled.append(run)
    return cancelled


# --- The store methods (mixed into the input request stores) -----------------------------------


class SqlRunCancels:
    """`InputRequestStore.cancel_run` and `cancel_agent_runs` on the SQL engines."""

    _write_engine: AsyncEngine

    async def cancel_run(
        self, project_id: str, request_id: str, cancellation: Cancellation, now: datetime
    ) -> tuple[InputRequest, list[RunKey]]:
        this_request = sa.and_(_INPUTS.c.id == request_id, _INPUTS.c.project_id == project_id)
        async with self._write_engine.begin() as connection:
            found = (await connection.execute(sa.select(_INPUTS).where(this_request))).first()
            if found is None:
                raise InputRequestNotFound(f"request for input {request_id!r} not found")
            run = (found.agent_id, found.run_id)
            # Responses to the run's requests take turns under its row's lock: so does a cancel.
            this_run = sa.and_(_RUNS.c.agent_id == run[0], _RUNS.c.run_id == run[1])
            await connection.execute(sa.select(_RUNS.c.run_id).where(this_run).with_for_update())
            request = as_seen(_request_of(found), now)
            if request.state is not InputRequestState.PENDING:
                raise refusal(request)
            cancelled = await cancel_trees(connection, [await top_of(connection, run)], cancellation, now)
        return closed(request, cancellation, now), cancelled

    async def cancel_agent_runs(
        self, agent_id: str, cancellation: Cancellation, now: datetime
    ) -> list[RunKey]:
        async with self._write_engine.begin() as connection:
            return await cancel_trees(
                connection, await agent_waiting_runs(connection, agent_id), cancellation, now
            )


class InMemoryRunCancels:
    """`InputRequestStore.cancel_run` and `cancel_agent_runs` on the in-memory state."""

    _draft: Callable[[], AbstractAsyncContextManager[State]]

    async def cancel_run(
        self, project_id: str, request_id: str, cancellation: Cancellation, now: datetime
    ) -> tuple[InputRequest, list[RunKey]]:
        async with self._draft() as state:
            stored = state.input_requests.get(request_id)
            if stored is None or stored.project_id != project_id:
                raise InputRequestNotFound(f"request for input {request_id!r} not found")
            request = as_seen(stored, now)
            if request.state is not InputRequestState.PENDING:
                raise refusal(request)
            top = top_in(state, (request.agent_id, request.run_id))
            cancelled = cancel_trees_in(state, [top], cancellation, now)
        return closed(request, cancellation, now), cancelled

    async def cancel_agent_runs(
        self, agent_id: str, cancellation: Cancellation, now: datetime
    ) -> list[RunKey]:
        async with self._draft() as state:
            return cancel_trees_in(state, agent_waiting_runs_in(state, agent_id), cancellation, now)
