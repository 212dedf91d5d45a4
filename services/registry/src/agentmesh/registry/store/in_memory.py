"""The registry store held in memory: for unit tests of the rules, and the plainest statement of
the store's contract (the same suite runs over it and over the SQL store).

A write transaction works on a copy of the state and publishes it only when it ends without an
exception, so a failed write leaves nothing behind and a reader never sees half of one; writers
take turns, as `BEGIN IMMEDIATE` makes them on SQLite.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime

from agentmesh.registry.agents.lifecycle import run_finished, run_started, takes_runs
from agentmesh.registry.agents.store import InMemoryAgents
from agentmesh.registry.agents.version_store import InMemoryAgentVersions
from agentmesh.registry.identity.sign_in_store import InMemorySignIn
from agentmesh.registry.identity.store import InMemoryAccounts, InMemoryApiKeys
from agentmesh.registry.in_memory_state import State, Stored, StoredLease
from agentmesh.registry.mcp_servers.store import InMemoryMcpServers
from agentmesh.registry.models import Agent
from agentmesh.registry.projects.store import InMemoryProjects
from agentmesh.registry.remote_agents.store import InMemoryRemoteAgents
from agentmesh.registry.runs.executor_store import InMemoryExecutors
from agentmesh.registry.runs.input_store import InMemoryInputRequestStore
from agentmesh.registry.runs.lease_store import InMemoryRunLeaseStore
from agentmesh.registry.schedules.store import InMemorySchedules
from agentmesh.registry.store.interface import (
    InputRequestStore,
    RegistryStore,
    RunChange,
    RunKey,
    RunLease,
    RunLeaseStore,
    StoreTransaction,
    Visibility,
)
from agentmesh.registry.usage.store import InMemoryUsageLedgerStore, UsageLedgerStore
from agentmesh.registry.webhooks.models import RunOutcome, WebhookEvent
from agentmesh.registry.webhooks.outbox_store import InMemoryWebhookOutboxStore, WebhookOutboxStore
from agentmesh.registry.webhooks.store import InMemoryWebhooks, enqueue_in_memory


class InMemoryRegistryStore(RegistryStore):
    """RegistryStore in dicts of immutable domain models."""

    def __init__(self) -> None:
        self._state = State()
        self._writer = asyncio.Lock()
        self._drafting: State | None = None
        self._leases = InMemoryRunLeaseStore(draft=self._draft, current=lambda: self._state)
        self._input_requests = InMemoryInputRequestStore(draft=self._draft, current=lambda: self._state)
        self._usage = InMemoryUsageLedgerStore()
        self._webhook_outbox = InMemoryWebhookOutboxStore(draft=self._draft, current=lambda: self._state)

    @property
    def leases(self) -> RunLeaseStore:
        return self._leases

    @property
    def input_requests(self) -> InputRequestStore:
        return self._input_requests

    @property
    def usage(self) -> UsageLedgerStore:
        return self._usage

    @property
    def webhook_outbox(self) -> WebhookOutboxStore:
        return self._webhook_outbox

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
            self._enqueue(agent, WebhookEvent.RUN_STARTED, run_id, lease.session_id if lease else "", now)
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
        cancelled: bool = False,
    ) -> RunChange | None:
        outcome = RunOutcome.of(completed=completed, cancelled=cancelled)

        def finish(agent: Agent, runs: set[tuple[str, str]]) -> Agent | None:
            if (agent_id, run_id) not in runs:
                return None
            runs.discard((agent_id, run_id))
            lease = self._state_leases().pop((agent_id, run_id), None)
            session_id = lease.session_id if lease else ""
            self._enqueue(agent, outcome.event, run_id, session_id, now, data=outcome.data)
            return run_finished(agent, now, completed=completed, tokens_used=tokens_used, cost=cost)

        return await self._run_change(visibility, agent_id, finish)

    def _enqueue(
        self,
        agent: Agent,
        event: WebhookEvent,
        run_id: str,
        session_id: str,
        now: datetime,
        *,
        data: str = "",
    ) -> None:
        assert self._drafting is not None  # in the write that records the run
        enqueue_in_memory(
            self._drafting,
            agent.project_id,
            event,
            run_id,
            now,
            agent_id=agent.id,
            run_id=run_id,
            session_id=session_id,
            data=data,
        )

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


class InMemoryTransaction(
    InMemoryAccounts,
    InMemoryAgents,
    InMemoryAgentVersions,
    InMemoryProjects,
    InMemoryMcpServers,
    InMemoryApiKeys,
    InMemoryRemoteAgents,
    InMemorySchedules,
    InMemoryExecutors,
    InMemorySignIn,
    InMemoryWebhooks,
    StoreTransaction,
):
    """The operations of one transaction, on the state it was given."""

    def __init__(self, state: State) -> None:
        self._state = state
