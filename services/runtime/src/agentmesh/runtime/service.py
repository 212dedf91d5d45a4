"""What a started service is (its gRPC server plus what must be closed after it drains), and the
life of a service's process (`run_service`, what every service's `__main__` calls, and
`process_telemetry`, which `agentmesh up` shares with it)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from agentmesh.runtime import eventloop
from agentmesh.runtime.heap import freeze_startup_heap
from agentmesh.runtime.logging import configure_logging
from agentmesh.runtime.metrics import Metrics, configure_metrics
from agentmesh.runtime.server import GrpcServer, wait_for_shutdown_signal
from agentmesh.runtime.settings import ServiceSettings
from agentmesh.runtime.telemetry import configure_tracing

logger = logging.getLogger(__name__)


@dataclass
class RunningService:
    """A service as its composition root started it. `stop` drains the server, then closes the
    service's resources (engines, channels, background tasks) in reverse order of opening."""

    name: str
    server: GrpcServer
    closers: list[Callable[[], Awaitable[object]]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.server.address

    async def stop(self, grace_seconds: float = 5.0) -> None:
        await self.server.stop(grace_seconds)
        await self.close()

    async def close(self) -> None:
        """Closes the service's resources, once its server stopped."""
        for close in reversed(self.closers):
            try:
                await close()
            except Exception:
                logger.exception("error while closing %s", self.name)


S = TypeVar("S", bound=ServiceSettings)


@contextlib.asynccontextmanager
async def process_telemetry(
    tracing_name: str, metrics_service: str | None = None
) -> AsyncIterator[Metrics | None]:
    """Tracing and metrics for this process, configured from the environment and flushed on
    exit. Yields the metrics handle (None when metrics are off)."""
    provider = configure_tracing(tracing_name)
    meters = configure_metrics(metrics_service)
    try:
        yield meters
    finally:
        if provider is not None:
            provider.shutdown()
        if meters is not None:
            meters.shutdown()


async def serve(name: str, settings: S, start: Callable[[S], Awaitable[RunningService]]) -> None:
    """Runs one service until SIGTERM or Ctrl-C, then drains it: the life of a service's process,
    with tracing and metrics configured from the environment."""
    async with process_telemetry(f"agentmesh-{name}", name):
        service = await start(settings)
        freeze_startup_heap()
        print(f"{name} serving gRPC on {service.address}", flush=True)
        http = getattr(service, "http", None)
        if http is not None:
            print(f"{name} serving HTTP on {http.url}", flush=True)
        await wait_for_shutdown_signal()
        logger.info("%s draining", name)
        await service.stop(settings.shutdown_grace_seconds)


def run_service(
    name: str, settings_type: Callable[[], S], start: Callable[[S], Awaitable[RunningService]]
) -> None:
    """A service's `__main__`: logging, settings from the environment, then `serve`."""
    configure_logging()
    eventloop.run(serve(name, settings_type(), start))
