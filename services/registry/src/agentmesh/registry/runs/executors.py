"""The executor pool: executors report in with a heartbeat and what they offer agents (tools,
model providers); the pool is those heard from within the heartbeat TTL."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.models import Executor, ModelProvider
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.validation import raise_if, required
from agentmesh.runtime.errors import FieldViolation

# How long a count of the pool's run slots is used before it is counted again.
RUN_SLOTS_SECONDS = 2.0


class ExecutorPool:
    """Executor membership: who is running agents now, and with what."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        executor_ttl_seconds: float,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._executor_ttl = timedelta(seconds=executor_ttl_seconds)
        self._now = clock
        self._monotonic = monotonic
        self._slots: tuple[float, int] | None = None  # (when counted, run slots)

    async def register_executor(
        self,
        executor_id: str,
        address: str,
        *,
        tools: Sequence[str] = (),
        model_providers: Sequence[ModelProvider] = (),
        run_slots: int = 0,
    ) -> Executor:
        """An executor reports in (its heartbeat), with what it offers agents and how many runs it
        takes at once."""
        violations = required("executor.id", executor_id) + required("executor.address", address)
        if run_slots < 0:
            violations.append(FieldViolation("executor.run_slots", "must not be negative"))
        raise_if(violations)
        executor = Executor(
            id=executor_id,
            address=address,
            heartbeat_at=self._now(),
            tools=list(tools),
            model_providers=list(model_providers),
            run_slots=run_slots,
        )
        async with self._store.write() as tx:
            return await tx.upsert_executor(executor)

    async def list_executors(self) -> list[Executor]:
        async with self._store.read() as tx:
            return await tx.list_executors(self._now() - self._executor_ttl)

    async def run_slots(self) -> int:
        """The run slots of the live executors (those that said how many they have), counted at
        most once every RUN_SLOTS_SECONDS: every run's admission asks."""
        now = self._monotonic()
        if self._slots is None or now - self._slots[0] >= RUN_SLOTS_SECONDS:
            self._slots = (now, sum(executor.run_slots for executor in await self.list_executors()))
        return self._slots[1]
