"""Work detached from its caller: bookkeeping that must happen even when a run is cancelled or
out of time (recording that it was cancelled, answering a delegation)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from agentmesh.runtime.interceptors import current_deadline

T = TypeVar("T")


async def run_detached(factory: Callable[[], Awaitable[T]], *, timeout_seconds: float) -> T:
    """Runs `factory()` to its end even if the caller is cancelled meanwhile (the caller then
    stops waiting, the work does not), bounded by `timeout_seconds` instead of the caller's
    deadline — which may be the very reason for the cleanup."""

    async def detached() -> T:
        # This task has a copy of the caller's context: clearing the deadline here is local.
        current_deadline.set(None)
        async with asyncio.timeout(timeout_seconds):
            return await factory()

    return await asyncio.shield(asyncio.ensure_future(detached()))
