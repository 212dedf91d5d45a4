"""Events that must reach the session's log whatever happens — a run's final event, a
delegation's response — but that the memory service did not take (down, restarting, its
database restarting). They are kept here and appended again, with backoff, until it takes them:
never dropped after some seconds of retries. Their idempotency keys (recorder.end_key,
response_key) make a retry of an append that did land store nothing twice. The runs they belong
to keep their leases meanwhile (`pending_runs`), so nobody takes them over; if this executor dies
first, the run's taker records the end instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from agentmesh.executor.durability.transient import is_transient
from agentmesh.memory.client import IdempotencyKeyReused, MemoryClient, RunEnded, RunTakenOver
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.runtime.background import BackgroundTask
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import bearer_metadata, current_token

logger = logging.getLogger(__name__)

_RETRY_SECONDS = 0.2
_MAX_RETRY_SECONDS = 2.0


def is_taken(error: BaseException) -> bool:
    """Whether an append was refused because another event holds its idempotency key (the first
    end stands). The client maps the refusal to AlreadyExists with this reason."""
    return isinstance(error, DomainError) and error.reason == IdempotencyKeyReused.default_reason


# The memory service's refusals of an event of a run that is no longer its executor's (memory
# `fence.py`): another executor took the run over, or ended it.
_SUPERSEDED = frozenset({RunTakenOver.default_reason, RunEnded.default_reason})


def is_superseded(error: BaseException) -> bool:
    """Whether an append was refused because the run went on, or ended, elsewhere."""
    return (
        isinstance(error, DomainError)
        and error.code == grpc.StatusCode.FAILED_PRECONDITION
        and error.reason in _SUPERSEDED
    )


@dataclass(frozen=True)
class _Kept:
    session_id: str
    project_id: str
    event: memory_service_pb2.NewEvent
    run: tuple[str, str]  # (agent id, run id): its lease stays while the event is kept
    metadata: Metadata | None


class EventOutbox:
    """Keeps undelivered events and delivers them in a background task, oldest first."""

    def __init__(
        self,
        memory: MemoryClient,
        *,
        system_metadata: Callable[[], Metadata | None],
        delivered: Callable[[], None] = lambda: None,
        superseded: Callable[[str], None] = lambda run_id: None,
    ) -> None:
        self._memory = memory
        self._delivered = delivered  # told after each event leaves (the finisher holds ends back)
        # Told of a run whose kept end was refused because the run went on, or ended, elsewhere:
        # its end is not this executor's to report (the finisher forgets it).
        self._superseded = superseded
        self._system_metadata = system_metadata
        self._kept: collections.deque[_Kept] = collections.deque()
        self._arrived = asyncio.Event()
        self._empty = asyncio.Event()
        self._task = BackgroundTask("event outbox", self._deliver)

    def start(self) -> None:
        self._task.start()

    async def stop(self, timeout_seconds: float) -> None:
        """Delivers what it keeps for up to `timeout_seconds`, then stops."""
        if not self._task.running:
            return
        if self._kept:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._empty.wait(), timeout_seconds)
        await self._task.stop()
        if self._kept:
            logger.error(
                "%d events were not recorded before shutdown (their runs' takers will)", len(self._kept)
            )

    def keep(
        self, session_id: str, project_id: str, event: memory_service_pb2.NewEvent, *, run: tuple[str, str]
    ) -> None:
        """Keeps an event the memory service did not take, to append it again."""
        # With a token of its own the executor sends what it kept as itself, the token read when
        # sent (one kept with the event would expire while memory is away); without one (no
        # signing secret), with the caller's.
        self._kept.append(_Kept(session_id, project_id, event, run, bearer_metadata(current_token.get())))
        self._arrived.set()

    def pending_runs(self) -> list[tuple[str, str]]:
        return [kept.run for kept in self._kept]

    def pending_run_ids(self) -> set[str]:
        """Runs with an event still kept: their ends wait for the registry (finisher)."""
        return {kept.run[1] for kept in self._kept}

    async def _deliver(self) -> None:
        backoff = _RETRY_SECONDS
        while True:
            if not self._kept:
                self._empty.set()
                self._arrived.clear()
                await self._arrived.wait()
                continue
            self._empty.clear()
            kept = self._kept[0]
            try:
                await self._memory.append_events(
                    kept.session_id,
                    kept.project_id,
                    [kept.event],
                    metadata=self._system_metadata() or kept.metadata,
                )
            except Exception as error:
                if is_taken(error):
                    pass  # another end was recorded first (the run's taker): it stands
                elif is_superseded(error):
                    # Taken over while its end was kept here (this executor was cut off from the
                    # registry too): the run's taker ends it.
                    logger.info("run %s went on elsewhere: its end kept here is dropped", kept.run[1])
                    self._superseded(kept.run[1])
                elif is_transient(error):
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_RETRY_SECONDS)
                    continue
                else:
                    logger.error("could not record event %s: %s", kept.event.idempotency_key, error)
            self._kept.popleft()
            self._delivered()
            backoff = _RETRY_SECONDS
