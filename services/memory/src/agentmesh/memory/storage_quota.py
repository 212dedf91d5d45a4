"""A project's `stored_bytes` limit: appends to a project whose kept events weigh its limit or
more are refused with QUOTA_EXCEEDED (docs/tenants.md#stored-bytes).

What counts is each event's content and metadata JSON (validation.event_bytes, the size
max_event_bytes bounds), added to its session's `stored_bytes` by the append that stores it and
subtracted by the retention trim that removes it (the store keeps both, in the append's own
statement); a project's count is the sum over its sessions, and a deleted project's sessions go
with it.

The limit is the registry's: the project's `stored_bytes` in force (its own, else the operator's
default; 0 is unlimited), asked of it with the system principal. Each replica reuses a project's
limit and count for `ttl_seconds`, adding what it stores itself meanwhile, so only the appends of
other replicas within that time (and appends in flight at once) can pass the limit.

Not refused, so that a run that reaches the limit mid-way still ends cleanly: a run's final event
(an answer or an error under its end key, fence.py) and a delegation's response. Each run has one of
each at most; they may take a project past its limit by that much.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agentmesh.memory.fence import end_key
from agentmesh.memory.models import EventType, NewEvent
from agentmesh.runtime.errors import QuotaExceeded

logger = logging.getLogger(__name__)

LIMIT = "stored_bytes"
# Projects remembered before the expired ones are dropped.
_MAX_REMEMBERED = 4096

LimitOf = Callable[[str], Awaitable[int]]
StoredBytesOf = Callable[[str], Awaitable[int]]


@dataclass
class _Known:
    limit: int
    stored: int
    read_at: float


def ends_a_run(event: NewEvent) -> bool:
    """Whether the event is one the limit never refuses: its run's final event, or a
    delegation's response (which the delegating run waits for)."""
    if event.event_type == EventType.DELEGATION_RESPONSE:
        return True
    return (
        event.event_type in (EventType.AGENT_RESPONSE, EventType.ERROR)
        and bool(event.run_id)
        and event.idempotency_key == end_key(event.run_id)
    )


class StoredBytesQuota:
    """Refuses the appends of projects at or over their `stored_bytes` limit; see the module's
    docstring."""

    def __init__(
        self,
        *,
        limit_of: LimitOf,
        stored_bytes_of: StoredBytesOf,
        retry_after_seconds: float,
        ttl_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit_of = limit_of
        self._stored_bytes_of = stored_bytes_of
        self._retry_after_seconds = retry_after_seconds
        self._ttl_seconds = ttl_seconds
        self._clock = clock
        self._known: dict[str, _Known] = {}
        self._reading: dict[str, asyncio.Future[_Known]] = {}

    async def check(self, project_id: str, events: Sequence[NewEvent]) -> None:
        """Raises QuotaExceeded when the project is at or over its limit and the batch holds an
        event that does not end a run."""
        if all(ends_a_run(event) for event in events):
            return
        known = await self._current(project_id)
        if known.limit and known.stored >= known.limit:
            raise QuotaExceeded(
                f"project {project_id!r} stores {known.stored} bytes of events, at its limit "
                f"project.limits.{LIMIT} of {known.limit}: nothing more is stored until events are "
                "removed (retention) or the limit is raised",
                subject=f"project:{project_id}",
                limit=LIMIT,
                retry_after_seconds=self._retry_after_seconds,
            )

    def stored(self, project_id: str, size: int) -> None:
        """Counts what an append of this replica stored, until the count is read again."""
        known = self._known.get(project_id)
        if known is not None:
            known.stored += size

    async def _current(self, project_id: str) -> _Known:
        known = self._known.get(project_id)
        if known is not None and self._clock() - known.read_at < self._ttl_seconds:
            return known
        reading = self._reading.get(project_id)
        if reading is None:
            # One read for every append of the project that misses meanwhile.
            reading = asyncio.ensure_future(self._read(project_id, known))
            self._reading[project_id] = reading
            reading.add_done_callback(lambda _: self._reading.pop(project_id, None))
        return await asyncio.shield(reading)

    async def _read(self, project_id: str, before: _Known | None) -> _Known:
        read_at = self._clock()
        try:
            limit = await self._limit_of(project_id)
        except Exception:
            # The registry unreachable: the limit last known holds (none: unlimited) until the
            # next read, so appends go on while it is away.
            logger.warning("could not read project %s's stored_bytes limit", project_id, exc_info=True)
            limit = before.limit if before is not None else 0
        stored = await self._stored_bytes_of(project_id) if limit else 0
        known = _Known(limit=limit, stored=stored, read_at=read_at)
        if len(self._known) >= _MAX_REMEMBERED:
            now = self._clock()
            self._known = {p: k for p, k in self._known.items() if now - k.read_at < self._ttl_seconds}
        self._known[project_id] = known
        return known
