"""Work detached from its caller: bookkeeping that must happen even when a run is cancelled or
out of time (recording that it was cancelled, answering a delegation)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from agentmesh.executor.durability.transient import is_transient
from agentmesh.runtime.interceptors import current_deadline

T = TypeVar("T")

# The pause between two tries of work whose first outcome is unknown (`known`).
ASK_AGAIN_SECONDS = 1.0

logger = logging.getLogger(__name__)


async def run_detached(factory: Callable[[], Awaitable[T]], *, timeout_seconds: float) -> T:
    """Runs `factory()` to its end even if the caller is cancelled meanwhile (the caller then
    stops waiting, the work does not), bounded by `timeout_seconds` instead of the caller's
    deadline — which may be the very reason for the cleanup."""

    async def detached() -> T:
        # This task has a copy of the caller's context: clearing the deadline here is local.
        current_deadline.set(None)
        async with asyncio.timeout(timeout_seconds):
            return await factory()

    work = asyncio.ensure_future(detached())
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        # The work goes on unheard: its failure is logged as what it is, instead of asyncio's
        # "Task exception was never retrieved" (seen by the 5,000-stream bench).
        work.add_done_callback(_log_unheard_failure)
        raise


def _log_unheard_failure(work: asyncio.Future[object]) -> None:
    if not work.cancelled() and (error := work.exception()) is not None:
        logger.warning("detached work failed after its caller stopped waiting: %r", error)


async def known(
    first: asyncio.Future[T],
    again: Callable[[], asyncio.Future[T]],
    *,
    what: str,
    stop_asking: Callable[[], bool],
) -> T | None:
    """What detached, idempotent work (`first`) ended with, found out whatever it takes: work that
    fails the way an outage or an overloaded peer does leaves its outcome unknown — it may have
    taken effect all the same — so it is made `again` (under the same keys: answered as done when
    it was), once a second, until the peer answers. None when it surely did not take effect (the
    peer refused it), when `stop_asking` (the executor hands its runs over: their takers find out
    instead), or when the caller, cancelled while it already waits, stops waiting (`waited`)."""
    work, doubted = first, 0.0
    while True:
        try:
            result = await waited(work)
        except Exception as error:
            if not is_transient(error):
                return None
            if stop_asking():
                logger.warning("%s: its outcome is unknown; left for the run's taker", what)
                return None
            if not doubted:
                doubted = time.monotonic()
                logger.warning("%s: its outcome is unknown (%r); asking until it is known", what, error)
        else:
            if doubted and result is not None:
                logger.info("%s: its outcome known after %.1f s", what, time.monotonic() - doubted)
            return result
        try:
            await asyncio.sleep(ASK_AGAIN_SECONDS)
        except asyncio.CancelledError:
            return None  # cancelled while it waits already: the executor stops (as `waited`)
        work = again()


async def waited(work: asyncio.Future[T]) -> T | None:
    """What detached `work` ends with (None when it was cancelled itself), waited for by a run
    that may be cancelled meanwhile: then it waits once more; cancelled again, it stops waiting
    (None; the work goes on regardless)."""
    with contextlib.suppress(asyncio.CancelledError):
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.cancelled():
                return None
            return await asyncio.shield(work)
    return None
