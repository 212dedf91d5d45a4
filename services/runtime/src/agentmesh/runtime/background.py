"""One task a service runs beside its RPCs until it stops: a sweeper, a heartbeat, a watch, an
outbox's delivery. Started untraced (its calls add no traces of their own), stopped by cancelling
it and waiting for it to finish.

Periodic work waits between its rounds with `pause`: `stop` then lets the round in flight finish
and ends the task at its next pause. A round cut off mid-statement would leave its database
connection to be rolled back under a cancelled task, which the pool can only log as a failed
reset; a round that does not finish within `round_seconds` is cancelled all the same."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from agentmesh.runtime.telemetry import untraced


class _Stopped(BaseException):
    """Raised at a pause once the task is stopping; never escapes the task."""


class BackgroundTask:
    """Runs `work` as a named task between `start` and `stop`; starting it twice runs it once."""

    def __init__(
        self, name: str, work: Callable[[], Coroutine[Any, Any, None]], *, round_seconds: float = 5.0
    ) -> None:
        self._name = name
        self._work = work
        self._round_seconds = round_seconds
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._periodic = False  # the work pauses between rounds
        self._pausing = False

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            with untraced():
                self._task = asyncio.create_task(self._run(), name=self._name)

    async def pause(self, seconds: float) -> None:
        """Waits `seconds` between two rounds of the work; where a stopping task ends."""
        self._periodic, self._pausing = True, True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)
        finally:
            self._pausing = False
        if self._stopping.is_set():
            raise _Stopped

    async def stop(self) -> None:
        """Ends the task and waits until it ended (a no-op when it is not running): at once when
        it waits on something, after its round when it is periodic and mid-round."""
        if self._task is None:
            return
        task, self._task = self._task, None
        self._stopping.set()
        if self._periodic and not self._pausing:
            await asyncio.wait({task}, timeout=self._round_seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        with contextlib.suppress(_Stopped):
            await self._work()
