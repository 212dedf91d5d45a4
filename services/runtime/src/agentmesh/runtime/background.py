"""One task a service runs beside its RPCs until it stops: a sweeper, a heartbeat, a watch, an
outbox's delivery. Started untraced (its calls add no traces of their own), stopped by cancelling
it and waiting for it to finish."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from agentmesh.runtime.telemetry import untraced


class BackgroundTask:
    """Runs `work` as a named task between `start` and `stop`; starting it twice runs it once."""

    def __init__(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._name = name
        self._work = work
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            with untraced():
                self._task = asyncio.create_task(self._work(), name=self._name)

    async def stop(self) -> None:
        """Cancels the task and waits until it ended (a no-op when it is not running)."""
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
