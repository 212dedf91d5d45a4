"""Storing the executor pool: the transaction methods (`ExecutorTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. An executor is one row, replaced by each heartbeat (rules in `executors.py`)."""

from __future__ import annotations

import abc
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import Executor
from agentmesh.registry.tables import ExecutorRow

# What a heartbeat changes; the id is the row's.
_REPORTED = ("address", "heartbeat_at", "tools", "model_providers", "run_slots")


class ExecutorTransaction(abc.ABC):
    """The executor pool's operations of one transaction."""

    @abc.abstractmethod
    async def upsert_executor(self, executor: Executor) -> Executor: ...

    @abc.abstractmethod
    async def list_executors(self, since: datetime) -> list[Executor]:
        """The executors heard from at `since` or later, by id."""


class SqlExecutors(ExecutorTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session it uses."""

    _session: AsyncSession

    async def upsert_executor(self, executor: Executor) -> Executor:
        dialect = postgresql if self._session.bind.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(ExecutorRow).values(**executor.model_dump())
        await self._session.execute(
            insert.on_conflict_do_update(
                index_elements=[ExecutorRow.id],
                set_={column: getattr(insert.excluded, column) for column in _REPORTED},
            )
        )
        return executor

    async def list_executors(self, since: datetime) -> list[Executor]:
        result = await self._session.execute(
            sa.select(ExecutorRow).where(ExecutorRow.heartbeat_at >= since).order_by(ExecutorRow.id)
        )
        return [from_row(Executor, row) for row in result.scalars()]


class InMemoryExecutors(ExecutorTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `executors`."""

    _state: State

    async def upsert_executor(self, executor: Executor) -> Executor:
        self._state.executors[executor.id] = executor
        return executor

    async def list_executors(self, since: datetime) -> list[Executor]:
        alive = [e for e in self._state.executors.values() if e.heartbeat_at >= since]
        return sorted(alive, key=lambda executor: executor.id)
