"""The executor's end of the registry's `WatchAgents`: one server stream, kept open
from start to stop, through which the registry pushes agents' changes as they commit. They keep
the remembered specs (`specs.py`) fresh, so a run makes no registry round trip for its spec and a
paused or terminated agent's run is refused here within milliseconds of the change.

The stream starts with a reset (forget everything remembered: nothing from before it is
replayed), so a reconnect after a registry restart or a cut misses nothing — what changed while
it was down is simply not remembered any more. While it is down the specs are not `watched` and
every run falls back to asking at its start (StartAgentRun's refusal and revision). It
reconnects with an exponential backoff (capped, with jitter), reset once a stream has delivered.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import grpc

from agentmesh.executor.agents.specs import AgentSpecs
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.background import BackgroundTask
from agentmesh.runtime.client import Metadata

logger = logging.getLogger(__name__)


class AgentWatcher:
    """Keeps `specs` fed from the registry's WatchAgents stream, in a background task."""

    def __init__(
        self,
        registry: RegistryClient,
        specs: AgentSpecs,
        *,
        executor_id: str,
        system_metadata: Callable[[], Metadata | None],
        min_backoff_seconds: float = 0.1,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        self._registry = registry
        self._specs = specs
        self._executor_id = executor_id
        self._system_metadata = system_metadata
        self._min_backoff = min_backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._task = BackgroundTask("agent watch", self._watch_forever)
        self.connects = 0  # streams that delivered their reset
        self.changes = 0  # agents' changes taken in
        # What to do when the registry says a suspended run may be ready to go on (the lease
        # keeper renews at once, which takes it over).
        self.on_runs_ready: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        if self._task.running:
            await self._task.stop()
            self._specs.watched = False

    async def _watch_forever(self) -> None:
        backoff = self._min_backoff
        while True:
            metadata = self._system_metadata()
            if metadata is None:  # no system token (no JWT secret): nothing to watch with
                return
            try:
                if await self._watch(metadata):
                    backoff = self._min_backoff
            except grpc.aio.AioRpcError as error:
                logger.warning(
                    "the registry's agent watch ended (%s: %s); runs ask at their start until it is back",
                    error.code().name,
                    error.details(),
                )
            except Exception:
                logger.exception("the registry's agent watch failed")
            finally:
                self._specs.watched = False
            await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, self._max_backoff)

    async def _watch(self, metadata: Metadata) -> bool:
        """One stream, until it ends; whether it delivered its reset."""
        request = registry_internal_service_pb2.WatchAgentsRequest(executor_id=self._executor_id)
        call = self._registry.internal_stub.WatchAgents(request, metadata=metadata)
        delivered = False
        try:
            async for message in call:
                if message.reset:
                    self._specs.reset()
                    if not delivered:
                        delivered = True
                        self.connects += 1
                        logger.info("watching the registry's agent changes")
                    self._specs.watched = True
                for change in message.changes:
                    self._specs.changed(change)
                self.changes += len(message.changes)
                if message.runs_ready:
                    self.on_runs_ready()
        finally:
            call.cancel()
        return delivered
