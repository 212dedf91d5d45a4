"""Suspended runs and their requests for a person's input on the SQL store and in memory (the
interface is `InputRequestStore`; `InMemoryInputRequestStore` is the plain statement of the same
contract). A parked run is a lease state, so the claim that hands it out is the lease store's
(`lease_store.py`), with the two helpers below that settle and read a run's requests.

Concurrency. Parking locks the agent's row, then the run's (the order a run's start and finish
lock them); a response locks the run's row before it changes its request, so the responses to one
run's requests take turns, and the one that leaves none pending always sees the others' (two of
them each seeing the other still pending would leave the run parked until its expiry). Of
concurrent responses to one request exactly one wins: the update is conditional on the request
still being pending, and the others find it answered. On SQLite every write transaction begins
with `BEGIN IMMEDIATE`, which serializes them all."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agentmesh.registry.agents.lifecycle import run_suspended
from agentmesh.registry.errors import (
    AgentNotFound,
    InputRequestNotFound,
    RunNotFound,
    RunNotHeld,
    ValidationFailed,
)
from agentmesh.registry.in_memory_state import State, Stored
from agentmesh.registry.models import PageRequest, RunKey, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.runs.cancel_store import InMemoryRunCancels, SqlRunCancels
from agentmesh.registry.runs.input_models import InputRequest, InputRequestState, InputResponse
from agentmesh.registry.runs.run_waits import (
    add_waits,
    add_waits_in,
    asked_below,
    asked_below_in,
    parked_until,
    release,
    release_in,
    waits_left,
)
from agentmesh.registry.runs.waiting import answered, as_seen, expired, is_due, refusal
from agentmesh.registry.store.interface import InputRequestStore
from agentmesh.registry.store.statements import FINISH_UPDATE, SUSPEND_UPDATE
from agentmesh.registry.tables import AgentRow, AgentRunRow, InputRequestRow
from agentmesh.registry.webhooks.models import WebhookEvent
from agentmesh.registry.webhooks.store import (
    enqueue_in_memory,
    enqueue_on,
    input_requested,
)
from agentmesh.runtime.errors import FieldViolation

_RUNS = AgentRunRow.__table__
_AGENTS = AgentRow.__table__
_INPUTS = InputRequestRow.__table__
_PENDING = InputRequestState.PENDING.value
# What the `request` column holds besides the columns: the request as raised.
_STATE_FIELDS = {"state", "response"}


_ASKED = WebhookEvent.RUN_INPUT_REQUESTED


async def _enqueue_input_requested(connection: AsyncConnection, request: InputRequest, now: datetime) -> None:
    """`run.input_requested` for the project's webhooks, in the transaction that suspends the run."""
    await enqueue_on(connection, request.project_id, _ASKED, request.id, now, **input_requested(request))


def _asked_below(run: RunKey, session_id: str, request_id: str) -> dict[str, str]:
    """`run.input_requested` for the push configs of a run parked on a question asked below it (a
    delegated run's): its task waits for input too. Its occurrence is the request below — what
    the gateway's catch-up names for such a task — so it is notified once. The project's webhooks
    had the request's own event."""
    data = json.dumps({"input_request_id": request_id})
    return {"agent_id": run[0], "run_id": run[1], "session_id": session_id, "data": data}


class SqlInputRequestStore(SqlRunCancels, InputRequestStore):
    """InputRequestStore on the registry's SQL engines (`write_engine` begins write transactions)."""

    def __init__(self, engine: AsyncEngine, *, write_engine: AsyncEngine) -> None:
        self._engine = engine
        self._write_engine = write_engine
        self._dialect = engine.dialect.name

    async def suspend(
        self,
        executor_id: str,
        run: RunKey,
        requests: Sequence[InputRequest],
        now: datetime,
        *,
        waits_on: Sequence[str] = (),
    ) -> list[InputRequest]:
        agent_id, run_id = run
        this_run = sa.and_(_RUNS.c.agent_id == agent_id, _RUNS.c.run_id == run_id)
        async with self._write_engine.begin() as connection:
            agent = (
                await connection.execute(
                    sa.select(_AGENTS.c.project_id, _AGENTS.c.slug)
                    .where(_AGENTS.c.id == agent_id)
                    .with_for_update()
                )
            ).first()
            if agent is None:
                raise AgentNotFound("agent not found")
            held = (
                await connection.execute(
                    sa.select(_RUNS.c.session_id, _RUNS.c.executor_id, _RUNS.c.orphaned, _RUNS.c.suspended)
                    .where(this_run)
                    .with_for_update()
                )
            ).first()
            if held is None:
                raise RunNotFound(f"run {run_id!r} is not in flight")
            ids = [request.id for request in requests]
            stored = {request.id: request for request in await _requests(connection, _INPUTS.c.id.in_(ids))}
            if _retried(stored, run, ids, suspended=held.suspended):
                return [stored[request_id] for request_id in ids]
            if held.executor_id != executor_id:
                raise RunNotHeld(f"run {run_id!r} is not held by executor {executor_id!r}")
            _check_own(stored, run, ids)
            for request in requests:
                if request.id not in stored:
                    stored[request.id] = _completed(request, agent.project_id, agent.slug, held.session_id)
                    await connection.execute(sa.insert(_INPUTS).values(**_row_values(stored[request.id])))
                    await _enqueue_input_requested(connection, stored[request.id], now)
            pending = await _requests(connection, _of_run(run), _INPUTS.c.state == _PENDING)
            waiting = await add_waits(connection, run, waits_on)
            if waiting and (below := await asked_below(connection, waits_on)):
                fields = _asked_below(run, held.session_id, below)
                await enqueue_on(connection, agent.project_id, _ASKED, below, now, task_only=True, **fields)
            await connection.execute(
                sa.update(_RUNS)
                .where(this_run)
                .values(
                    suspended=True,
                    orphaned=True,
                    executor_id="",
                    lease_expires_at=parked_until(
                        now, min((r.expires_at for r in pending), default=None), waiting
                    ),
                )
            )
            bookkeeping = {"agent_id": agent_id, "now": now}
            if not held.orphaned:  # it counted in flight: out, as a failed finish
                await connection.execute(
                    FINISH_UPDATE[self._dialect],
                    {**bookkeeping, "completed": 0, "tokens_used": 0, "cost": 0.0},
                )
            await connection.execute(SUSPEND_UPDATE, bookkeeping)
        return [stored[request_id] for request_id in ids]

    async def get_request(self, project_id: str, request_id: str) -> InputRequest | None:
        async with self._engine.connect() as connection:
            found = await _requests(
                connection, _INPUTS.c.id == request_id, _INPUTS.c.project_id == project_id
            )
        return found[0] if found else None

    async def list_requests(
        self,
        project_id: str,
        page: PageRequest,
        *,
        state: InputRequestState,
        now: datetime,
        session_id: str = "",
    ) -> Slice[InputRequest]:
        conditions = [_INPUTS.c.project_id == project_id, _in_state(state, now)]
        if session_id:
            conditions.append(_INPUTS.c.session_id == session_id)
        key = (_INPUTS.c.created_at, _INPUTS.c.id)
        listed = sa.select(_INPUTS).where(*conditions)
        if page.after is not None:
            after = [sa.literal(value, column.type) for value, column in zip(page.after, key, strict=True)]
            listed = listed.where(sa.tuple_(*key) > sa.tuple_(*after))
        async with self._engine.connect() as connection:
            total = await connection.scalar(
                sa.select(sa.func.count()).select_from(_INPUTS).where(*conditions)
            )
            rows = list(await connection.execute(listed.order_by(*key).limit(page.size + 1)))
        items = [_request(row) for row in rows[: page.size]]
        return Slice(items=items, has_more=len(rows) > page.size, total=total or 0)

    async def respond(
        self, project_id: str, request_id: str, response: InputResponse, now: datetime
    ) -> InputRequest:
        this_request = sa.and_(_INPUTS.c.id == request_id, _INPUTS.c.project_id == project_id)
        async with self._write_engine.begin() as connection:
            found = await _requests(connection, this_request)
            if not found:
                raise InputRequestNotFound(f"request for input {request_id!r} not found")
            request = found[0]
            run = (request.agent_id, request.run_id)
            # The run's responses take turns (see the module's docstring).
            await connection.execute(sa.select(_RUNS.c.run_id).where(_run_row(run)).with_for_update())
            changed = await connection.execute(
                sa.update(_INPUTS)
                .where(this_request, _INPUTS.c.state == _PENDING, _INPUTS.c.expires_at > now)
                .values(state=InputRequestState.ANSWERED.value, response=response.model_dump(mode="json"))
            )
            if changed.rowcount != 1:
                raise refusal(as_seen((await _requests(connection, this_request))[0], now))
            if not await _requests(connection, _of_run(run), _INPUTS.c.state == _PENDING) and not (
                await waits_left(connection, run)
            ):
                await connection.execute(
                    sa.update(_RUNS).where(_run_row(run), _RUNS.c.suspended).values(lease_expires_at=now)
                )
        return answered(request, response)

    async def release_waits(self, run_ids: Sequence[str], now: datetime) -> int:
        return await release(self._engine, self._write_engine, run_ids, now)


async def settle_requests(connection: AsyncConnection, run: RunKey, now: datetime) -> datetime | None:
    """Expires the run's pending requests past their expiry, in the claim's transaction; the
    earliest expiry of those still pending, or None when none is (the run may resume)."""
    waiting = []
    for request in await _requests(connection, _of_run(run), _INPUTS.c.state == _PENDING):
        if not is_due(request, now):
            waiting.append(request.expires_at)
            continue
        settled = expired(request)
        await connection.execute(
            sa.update(_INPUTS)
            .where(_INPUTS.c.id == request.id, _INPUTS.c.state == _PENDING)
            .values(state=settled.state.value, response=_response_value(settled.response))
        )
    return min(waiting, default=None)


async def run_requests(connection: AsyncConnection, run: RunKey) -> list[InputRequest]:
    """Every request of the run, oldest first."""
    return await _requests(connection, _of_run(run))


async def _requests(connection: AsyncConnection, *conditions: sa.ColumnElement[bool]) -> list[InputRequest]:
    order = (_INPUTS.c.created_at, _INPUTS.c.id)
    return [
        _request(row)
        for row in await connection.execute(sa.select(_INPUTS).where(*conditions).order_by(*order))
    ]


def _of_run(run: RunKey) -> sa.ColumnElement[bool]:
    return sa.and_(_INPUTS.c.agent_id == run[0], _INPUTS.c.run_id == run[1])


def _run_row(run: RunKey) -> sa.ColumnElement[bool]:
    return sa.and_(_RUNS.c.agent_id == run[0], _RUNS.c.run_id == run[1])


def _in_state(state: InputRequestState, now: datetime) -> sa.ColumnElement[bool]:
    """Requests in `state` as they stand at `now` (`waiting.as_seen`)."""
    pending = _INPUTS.c.state == _PENDING
    if state is InputRequestState.PENDING:
        return sa.and_(pending, _INPUTS.c.expires_at > now)
    if state is InputRequestState.EXPIRED:
        return sa.or_(_INPUTS.c.state == state.value, sa.and_(pending, _INPUTS.c.expires_at <= now))
    return _INPUTS.c.state == state.value


def _request(row: Any) -> InputRequest:
    return InputRequest.model_validate({**row.request, "state": row.state, "response": row.response})


def _row_values(request: InputRequest) -> dict[str, Any]:
    return {
        "id": request.id,
        "project_id": request.project_id,
        "agent_id": request.agent_id,
        "run_id": request.run_id,
        "session_id": request.session_id,
        "state": request.state.value,
        "request": request.model_dump(mode="json", exclude=_STATE_FIELDS),
        "response": _response_value(request.response),
        "created_at": request.created_at,
        "expires_at": request.expires_at,
    }


def _response_value(response: InputResponse | None) -> dict[str, Any] | None:
    return None if response is None else response.model_dump(mode="json")


# --- Shared by both stores: what a suspension and a response decide ------------------------------


def _completed(request: InputRequest, project_id: str, agent_slug: str, session_id: str) -> InputRequest:
    """A request as its executor raised it, completed with what the registry knows of its run."""
    return request.model_copy(
        update={
            "project_id": project_id,
            "agent": agent_slug,
            "session_id": session_id,
            "state": InputRequestState.PENDING,
            "response": None,
        }
    )


def _retried(stored: dict[str, InputRequest], run: RunKey, ids: Sequence[str], *, suspended: bool) -> bool:
    """Whether a suspension repeats one already made (its first answer lost): the run is parked
    and holds every request named."""
    return suspended and all(
        request_id in stored and (stored[request_id].agent_id, stored[request_id].run_id) == run
        for request_id in ids
    )


def _check_own(stored: dict[str, InputRequest], run: RunKey, ids: Sequence[str]) -> None:
    """Refuses request ids another run's requests have."""
    violations = [
        FieldViolation(f"input_requests[{index}].id", "is the id of another run's request")
        for index, request_id in enumerate(ids)
        if request_id in stored and (stored[request_id].agent_id, stored[request_id].run_id) != run
    ]
    if violations:
        raise ValidationFailed.of(violations)


class InMemoryInputRequestStore(InMemoryRunCancels, InputRequestStore):
    """InputRequestStore on the in-memory store's state: each change in a `draft` of it
    (published when it ends without an exception), reads on the `current` one."""

    def __init__(
        self,
        *,
        draft: Callable[[], AbstractAsyncContextManager[State]],
        current: Callable[[], State],
    ) -> None:
        self._draft = draft
        self._current = current

    async def suspend(
        self,
        executor_id: str,
        run: RunKey,
        requests: Sequence[InputRequest],
        now: datetime,
        *,
        waits_on: Sequence[str] = (),
    ) -> list[InputRequest]:
        async with self._draft() as state:
            stored_agent = state.agents.get(run[0])
            if stored_agent is None:
                raise AgentNotFound("agent not found")
            lease = state.leases.get(run)
            if lease is None and run not in state.runs:
                raise RunNotFound(f"run {run[1]!r} is not in flight")
            ids = [request.id for request in requests]
            stored = {i: state.input_requests[i] for i in ids if i in state.input_requests}
            if _retried(stored, run, ids, suspended=lease is not None and lease.suspended):
                return [stored[request_id] for request_id in ids]
            if lease is None or lease.executor_id != executor_id:
                raise RunNotHeld(f"run {run[1]!r} is not held by executor {executor_id!r}")
            _check_own(stored, run, ids)
            agent = stored_agent.value
            for request in requests:
                if request.id not in stored:
                    stored[request.id] = _completed(request, agent.project_id, agent.slug, lease.session_id)
                    state.input_requests[request.id] = stored[request.id]
                    new = stored[request.id]
                    enqueue_in_memory(state, new.project_id, _ASKED, new.id, now, **input_requested(new))
            pending = [
                r.expires_at for r in run_requests_in(state, run) if r.state is InputRequestState.PENDING
            ]
            waiting = add_waits_in(state, run, waits_on)
            if waiting and (below := asked_below_in(state, waits_on)):
                fields = _asked_below(run, lease.session_id, below)
                enqueue_in_memory(state, agent.project_id, _ASKED, below, now, task_only=True, **fields)
            state.leases[run] = dataclasses.replace(
                lease,
                suspended=True,
                orphaned=True,
                executor_id="",
                expires_at=parked_until(now, min(pending, default=None), waiting),
            )
            state.runs.discard(run)
            state.agents[run[0]] = Stored(
                run_suspended(agent, now, in_flight=not lease.orphaned), stored_agent.request_id
            )
        return [stored[request_id] for request_id in ids]

    async def get_request(self, project_id: str, request_id: str) -> InputRequest | None:
        request = self._current().input_requests.get(request_id)
        return request if request is not None and request.project_id == project_id else None

    async def list_requests(
        self,
        project_id: str,
        page: PageRequest,
        *,
        state: InputRequestState,
        now: datetime,
        session_id: str = "",
    ) -> Slice[InputRequest]:
        found = [
            request
            for request in self._current().input_requests.values()
            if request.project_id == project_id
            and (not session_id or request.session_id == session_id)
            and as_seen(request, now).state is state
        ]
        return keyset_slice(found, page)

    async def respond(
        self, project_id: str, request_id: str, response: InputResponse, now: datetime
    ) -> InputRequest:
        async with self._draft() as state:
            request = state.input_requests.get(request_id)
            if request is None or request.project_id != project_id:
                raise InputRequestNotFound(f"request for input {request_id!r} not found")
            if as_seen(request, now).state is not InputRequestState.PENDING:
                raise refusal(as_seen(request, now))
            state.input_requests[request_id] = answered(request, response)
            run = (request.agent_id, request.run_id)
            lease = state.leases.get(run)
            left = [r for r in run_requests_in(state, run) if r.state is InputRequestState.PENDING]
            if lease is not None and lease.suspended and not left and run not in state.run_waits:
                state.leases[run] = dataclasses.replace(lease, expires_at=now)
        return state.input_requests[request_id]

    async def release_waits(self, run_ids: Sequence[str], now: datetime) -> int:
        if not any(set(run_ids) & children for children in self._current().run_waits.values()):
            return 0
        async with self._draft() as state:
            return release_due_in(state, run_ids, now)


def release_due_in(state: State, run_ids: Sequence[str], now: datetime) -> int:
    """`run_waits.release` on the in-memory state: how many parked runs became due."""
    due = 0
    for parent in release_in(state, run_ids):
        lease = state.leases.get(parent)
        pending = [r for r in run_requests_in(state, parent) if r.state is InputRequestState.PENDING]
        if lease is not None and lease.suspended and not pending:
            state.leases[parent] = dataclasses.replace(lease, expires_at=now)
            due += 1
    return due


def settle_requests_in(state: State, run: RunKey, now: datetime) -> datetime | None:
    """`settle_requests` on the in-memory state."""
    waiting = []
    for request in run_requests_in(state, run):
        if is_due(request, now):
            state.input_requests[request.id] = expired(request)
        elif request.state is InputRequestState.PENDING:
            waiting.append(request.expires_at)
    return min(waiting, default=None)


def run_requests_in(state: State, run: RunKey) -> list[InputRequest]:
    """`run_requests` on the in-memory state."""
    found = [r for r in state.input_requests.values() if (r.agent_id, r.run_id) == run]
    return sorted(found, key=lambda request: (request.created_at, request.id))
