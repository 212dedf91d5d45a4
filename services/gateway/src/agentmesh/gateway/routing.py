"""Which executors the gateway sends runs to: the static ones from settings plus the pool
membership the registry keeps (executors register and heartbeat there), each health-checked."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from agentmesh.executor.client import ExecutorPool
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import AUTHORIZATION, TokenCodec
from agentmesh.runtime.telemetry import untraced

logger = logging.getLogger(__name__)


class ExecutorMembership:
    """Keeps an ExecutorPool in step with the registry's executor list and the executors' health.

    Executors the registry lists are added to the pool (unless discovery is off); every member
    is health-checked, so one that is down or draining (health NOT_SERVING) is tried last until
    it serves again.
    """

    def __init__(
        self,
        pool: ExecutorPool,
        registry: RegistryClient,
        tokens: TokenCodec,
        *,
        refresh_interval_seconds: float,
        health_interval_seconds: float,
        discovery: bool = True,
    ) -> None:
        self._pool = pool
        self._registry = registry
        self._tokens = tokens
        self._refresh_interval = refresh_interval_seconds
        self._health_interval = health_interval_seconds
        self._discovery = discovery
        self._tasks: list[asyncio.Task[None]] = []

    async def refresh(self) -> None:
        """Adds the executors the registry lists; a registry that cannot answer changes nothing."""
        if not self._discovery:
            return
        metadata = ((AUTHORIZATION, f"Bearer {self._tokens.system_token()}"),)
        try:
            executors = await self._registry.list_executors(metadata=metadata)
        except DomainError as error:
            logger.warning("could not list executors from the registry: %s", error.message)
            return
        for executor in executors:
            if executor.address and executor.address not in self._pool.addresses:
                logger.info("executor %s (%s) joined the pool", executor.id, executor.address)
                self._pool.add(executor.address)

    async def check_health(self) -> None:
        await self._pool.check_health()

    async def start(self) -> None:
        with untraced():
            await self.refresh()
            await self.check_health()
            self._tasks = [asyncio.create_task(_every(self._health_interval, self.check_health))]
            if self._discovery:
                self._tasks.append(asyncio.create_task(_every(self._refresh_interval, self.refresh)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []


async def _every(interval_seconds: float, action: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            await action()
        except Exception:
            logger.exception("periodic executor membership task failed")
