"""What a started service is: its gRPC server plus what must be closed after it drains."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agentmesh.runtime.server import GrpcServer

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
        for close in reversed(self.closers):
            try:
                await close()
            except Exception:
                logger.exception("error while closing %s", self.name)
