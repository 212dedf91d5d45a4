"""Waiting for what a service does after it answered (a run's bookkeeping, a retention sweep)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, what: str = "") -> float:
    """Polls `check` until it holds and returns the seconds it took; fails naming `what` after
    `timeout` seconds."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start
