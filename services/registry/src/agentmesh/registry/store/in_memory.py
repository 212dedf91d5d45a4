"""The registry store held in memory: for unit tests of the rules, and the plainest statement of
the store's contract (the same suite runs over it and over the SQL store).

A write transaction works on a copy of the state and publishes it only when it ends without an
exception, so a failed write leaves nothing behind and a reader never sees half of one; writers
take turns, as `BEGIN IMMEDIATE` makes them on SQLite.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import TypeVar

from agentmesh.registry.agents.lifecycle import run_finished, run_resumed, run_started, takes_runs
from agentmesh.registry.agents.store import InMemoryAgents
from agentmesh.registry.identity.store import InMemoryAccounts, InMemoryApiKeys
from agentmesh.registry.in_memory_state import SessionTurn, State, Stored, StoredLease
from agentmesh.registry.mcp_servers.store import InMemoryMcpServers
from agentmesh.registry.models import (
    Agent,
    AgentType,
    Project,
)
from agentmesh.registry.projects.store import InMemoryProjects
from agentmesh.registry.remote_agents.store import InMemoryRemoteAgents
from agentmesh.registry.runs.executor_store import InMemoryExecutors
from agentmesh.registry.store.interface import (
    OrphanedRun,
    RegistryStore,
    RunChange,
    RunKey,
    RunLease,
    RunLeaseStore,
    StoreTransaction,
    Visibility,
)

T = TypeVar("T", AgentType, Project, Agent)


class InMemoryRegistryStore(RegistryStore):
    """RegistryStore in dicts of immutable domain models."""

    def __init__(self) -> None:
        self._state = State()
        self._writer = asyncio.Lock()
        self._drafting: State | None = None
        self._leases = InMemoryRunLeaseStore(self)

    @property
    def leases(self) -> RunLeaseStore:
        return self._leases

    def read(self) -> AbstractAsyncContextManager[StoreTransaction]:
        return self._read()

    def write(self) -> AbstractAsyncContextManager[StoreTransaction]:
        return self._write()

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[StoreTransaction]:
        yield InMemoryTransaction(self._state)

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[StoreTransaction]:
        async with self._draft() as draft:
            yield InMemoryTransaction(draft)

    @asynccontextmanager
    async def _draft(self) -> AsyncIterator[State]:
        """A copy of the state to change, published when the block ends without an exception."""
        async with self._writer:
            # Values are frozen models, so copying the containers copies the state.
            draft = State(**{name: copy.copy(value) for name, value in vars(self._state).items()})
            self._drafting = draft
            try:
                yield draft
            finally:
                self._drafting = None
            self._state = draft

    async def start_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        lease: RunLease | None = None,
    ) -> RunChange | None:
        def start(agent: Agent, runs: set[tuple[str, str]]) -> Agent | None:
            key = (agent_id, run_id)
            if not takes_runs(agent) or key in runs:
                return None
            runs.add(key)
            if lease is not None:
                self._state_leases()[key] = StoredLease(lease.session_id, lease.executor_id, lease.expires_at)
            return run_started(agent, now)

        return await self._run_change(visibility, agent_id, start)

    async def finish_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        completed: bool,
        tokens_used: int,
        cost: float,
    ) -> RunChange | None:
        def finish(agent: Agent, runs: set[tuple[str, str]]) -> Agent | None:
            if (agent_id, run_id) not in runs:
                return None
            runs.discard((agent_id, run_id))
            self._state_leases().pop((agent_id, run_id), None)
            return run_finished(agent, now, completed=completed, tokens_used=tokens_used, cost=cost)

        return await self._run_change(visibility, agent_id, finish)

    def _state_leases(self) -> dict[RunKey, StoredLease]:
        # The draft of the write in progress (`_run_change` holds the writer).
        assert self._drafting is not None
        return self._drafting.leases

    async def _run_change(
        self,
        visibility: Visibility,
        agent_id: str,
        change: Callable[[Agent, set[tuple[str, str]]], Agent | None],
    ) -> RunChange | None:
        async with self._draft() as state:
            stored = state.agents.get(agent_id)
            if stored is None:
                return None
            project = state.projects[stored.value.project_id].value
            if not (visibility.everything or project.owner_id == visibility.user_id):
                return None
            changed = change(stored.value, state.runs)
            if changed is not None:
                stored = state.agents[agent_id] = Stored(changed, stored.request_id)
            return RunChange(
                agent=stored.value,
                changed=changed is not None,
                project_updated_at=project.updated_at,
                type_updated_at=state.agent_types[stored.value.agent_type_id].value.updated_at,
            )


class InMemoryRunLeaseStore(RunLeaseStore):
    """RunLeaseStore on an InMemoryRegistryStore's state."""

    def __init__(self, store: InMemoryRegistryStore) -> None:
        self._store = store

    async def renew(self, executor_id: str, runs: Sequence[RunKey], expires_at: datetime) -> list[RunKey]:
        async with self._store._draft() as state:
            held, lost = _holding(state, executor_id, runs)
            for key in held:
                state.leases[key] = _replace(state.leases[key], expires_at=expires_at)
        return lost

    async def expire(self, now: datetime, *, executor_ids: Collection[str] | None = None) -> int:
        async with self._store._draft() as state:
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
        async with self._store._draft() as state:
            free = [k for k, v in state.leases.items() if v.orphaned and v.expires_at <= now]
            for key in sorted(free, key=lambda k: state.leases[k].expires_at)[: max(limit, 0)]:
                lease = state.leases[key] = _replace(
                    state.leases[key], executor_id=executor_id, expires_at=expires_at
                )
                agent = state.agents[key[0]].value
                claimed.append(OrphanedRun(key[0], key[1], lease.session_id, agent.project_id, agent.slug))
        return claimed

    async def close(self, executor_id: str, runs: Sequence[RunKey]) -> None:
        async with self._store._draft() as state:
            for key in runs:
                lease = state.leases.get(key)
                if lease is not None and lease.orphaned and lease.executor_id == executor_id:
                    del state.leases[key]

    async def resume(
        self, executor_id: str, runs: Sequence[RunKey], now: datetime, expires_at: datetime
    ) -> list[RunKey]:
        async with self._store._draft() as state:
            held, lost = _holding(state, executor_id, runs)
            for key in held:
                lease = state.leases[key]
                state.leases[key] = _replace(lease, orphaned=False, expires_at=expires_at)
                if lease.orphaned:  # else resumed already (a retry)
                    state.runs.add(key)
                    _count_run(state, key[0], now, counted_in=True)
        return lost

    async def take_turn(
        self, session_id: str, run: RunKey, *, reject: bool = False, interrupt: bool = False
    ) -> list[RunKey]:
        async with self._store._draft() as state:
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
        state = self._store._state
        mine = next((turn for turn in state.turns if turn.run == run), None)
        return [] if mine is None else _turns_ahead(state, mine.session_id, mine)

    async def interrupted(self, executor_id: str) -> list[RunKey]:
        state = self._store._state
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


class InMemoryTransaction(
    InMemoryAccounts,
    InMemoryAgents,
    InMemoryProjects,
    InMemoryMcpServers,
    InMemoryApiKeys,
    InMemoryRemoteAgents,
    InMemoryExecutors,
    StoreTransaction,
):
    """The operations of one transaction, on the state it was given."""

    def __init__(self, state: State) -> None:
        self._state = state
