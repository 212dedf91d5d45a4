"""The executor pool: executors report in with a heartbeat and what they offer agents (tools,
model providers); the pool is those heard from within the heartbeat TTL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.models import Executor, ModelProvider
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.validation import raise_if, required


class ExecutorPool:
    """Executor membership: who is running agents now, and with what."""

    def __init__(self, store: RegistryStore, *, executor_ttl_seconds: float, clock: Clock = utc_now) -> None:
        self._store = store
        self._executor_ttl = timedelta(seconds=executor_ttl_seconds)
        self._now = clock

    async def register_executor(
        self,
        executor_id: str,
        address: str,
        *,
        tools: Sequence[str] = (),
        model_providers: Sequence[ModelProvider] = (),
    ) -> Executor:
        """An executor reports in (its heartbeat), with what it offers agents."""
        raise_if(required("executor.id", executor_id) + required("executor.address", address))
        executor = Executor(
            id=executor_id,
            address=address,
            heartbeat_at=self._now(),
            tools=list(tools),
            model_providers=list(model_providers),
        )
        async with self._store.write() as tx:
            return await tx.upsert_executor(executor)

    async def list_executors(self) -> list[Executor]:
        async with self._store.read() as tx:
            return await tx.list_executors(self._now() - self._executor_ttl)
