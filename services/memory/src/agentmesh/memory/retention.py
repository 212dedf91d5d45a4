"""The memory service's background work: `RetentionSweeper` enforces the projects' retention
policies in small batches, and erases what appends racing a project's deletion left behind.
It knows neither protobuf nor SQL."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from agentmesh.memory.event_store import EventStore
from agentmesh.memory.memory import Clock, utc_now
from agentmesh.memory.models import RetentionPolicy, Session
from agentmesh.runtime.background import BackgroundTask

logger = logging.getLogger(__name__)


class RetentionSweeper:
    """Removes what the projects' retention policies no longer keep, oldest events first, in
    small transactions so appends never wait long behind it."""

    def __init__(
        self,
        store: EventStore,
        *,
        interval_seconds: float,
        batch_events: int = 500,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._interval_seconds = interval_seconds
        self._batch_events = batch_events
        self._clock = clock
        self._task = BackgroundTask("memory-retention-sweeper", self._run)

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        while True:
            await self._task.pause(self._interval_seconds)
            try:
                removed = await self.sweep()
            except Exception:
                logger.exception("retention sweep failed; trying again in %.1fs", self._interval_seconds)
            else:
                if removed:
                    logger.info("retention removed %d events", removed)

    async def sweep(self) -> int:
        """One pass over every bounded policy, and over what appends racing a project's
        deletion left behind. Returns how many events it removed by policy."""
        erased = await self._store.erase_deleted_projects()
        if erased:
            logger.info("erased %d sessions of deleted projects", erased)
        removed = 0
        for policy in await self._store.bounded_retention_policies():
            removed += await self._sweep_project(policy)
        return removed

    async def _sweep_project(self, policy: RetentionPolicy) -> int:
        removed = 0
        max_events = policy.max_events_per_session or None
        cutoff = self._clock() - timedelta(seconds=policy.max_age_seconds) if policy.max_age_seconds else None
        after_id = ""
        while True:
            page = await self._store.sessions_to_trim(
                policy.project_id,
                more_events_than=max_events,
                created_before=cutoff,
                after_id=after_id,
                limit=100,
            )
            for session in page:
                removed += await self._trim(session, max_events, cutoff)
            if len(page) < 100:
                return removed
            after_id = page[-1].id

    async def _trim(self, session: Session, max_events: int | None, cutoff: datetime | None) -> int:
        removed = 0
        first_seq = session.first_seq
        while True:
            target = first_seq
            if max_events is not None:
                target = max(target, min(session.last_seq - max_events + 1, first_seq + self._batch_events))
            if cutoff is not None:
                aged = await self._store.expired_prefix_end(
                    session.id,
                    session.project_id,
                    from_seq=first_seq,
                    cutoff=cutoff,
                    limit=self._batch_events,
                )
                target = max(target, aged)
            if target <= first_seq:
                return removed
            removed += await self._store.trim_session(session.id, session.project_id, first_seq=target)
            first_seq = target
            # Let appends and reads in between the batches.
            await asyncio.sleep(0)
