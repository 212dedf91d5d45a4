"""Firing schedules exactly once per due time, whichever gateway asks.

Gateways poll `claim` with their time. For each schedule due then, one write transaction moves
its next fire time on only if it still is the due time read (`advance_schedule`), and records
the due time's firing (unique by schedule and due time): of two gateways racing for a due time,
one claims it and the other finds the schedule moved. The claimer starts the firing's run
through its normal chat path and reports back (`record`): the run started, then how it ended.

In the same transaction the schedule's policies decide what the firing is:
- missed: a due time found more than `missed_grace_seconds` late (the mesh was down) is recorded
  `skipped_missed` under `skip`; under `run_once` it fires, once, for all the times missed (the
  next fire time is counted from now, so the times in between are not claimed one by one).
- overlap, when the schedule's previous firing is still open (its run in flight, or claimed and
  starting): `skip` records `skipped_overlap`; `queue` records it `queued`, and a later pass hands
  it out once nothing of the schedule is running; `cancel_previous` marks the previous run's
  session turn interrupted (its executor cancels it at its next lease renewal, as double texting's
  `interrupt` does) and fires. A previous firing still starting is marked cancelled at once, and
  its run interrupted when its gateway reports it started.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from agentmesh.registry.clock import Clock
from agentmesh.registry.errors import ScheduleFiringNotFound, ValidationFailed
from agentmesh.registry.schedules.models import (
    CANCELLED,
    FAILED,
    PENDING,
    QUEUED,
    RECORDED,
    RUNNING,
    SKIPPED_MISSED,
    SKIPPED_OVERLAP,
    ClaimedFiring,
    Schedule,
    ScheduleFiring,
)
from agentmesh.registry.schedules.registry import session_for
from agentmesh.registry.schedules.timing import next_fire_at, render
from agentmesh.registry.store import RegistryStore, StoreTransaction

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 20
MAX_LIMIT = 200


class ScheduleClaims:
    """Claims due firings for the gateway that asks, and records what became of them."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        clock: Clock,
        missed_grace_seconds: float = 60.0,
        start_timeout_seconds: float = 300.0,
    ) -> None:
        self._store = store
        self._clock = clock
        self._missed_grace = timedelta(seconds=missed_grace_seconds)
        # A firing claimed but never reported started (its gateway stopped) stops counting as
        # open after this long, so it does not hold its schedule's later firings forever.
        self._start_timeout = timedelta(seconds=start_timeout_seconds)

    async def claim(self, now: datetime, limit: int = 0) -> list[ClaimedFiring]:
        """The firings due at `now` that the caller now owns (at most `limit`)."""
        limit = min(limit or DEFAULT_LIMIT, MAX_LIMIT)
        async with self._store.read() as tx:
            due = [s.id for s in await tx.due_schedules(now, limit)]
            queued = await tx.schedules_with_queued_firings(limit)
        claimed: list[ClaimedFiring] = []
        for schedule_id in queued:
            if len(claimed) < limit and (found := await self._release_queued(schedule_id, now)):
                claimed.append(found)
        for schedule_id in due:
            if len(claimed) < limit and (found := await self._claim_due(schedule_id, now)):
                claimed.append(found)
        return claimed

    async def record(self, firing_id: str, outcome: str, *, run_id: str = "", error: str = "") -> None:
        """What became of a claimed firing: `running` (with its run), then `completed`, `failed`
        or `cancelled`. A final outcome is never replaced (a firing cancelled by the next one
        stays cancelled, a repeated report changes nothing)."""
        if outcome not in RECORDED:
            raise ValidationFailed.field("outcome", f"must be one of {', '.join(RECORDED)}")
        if outcome == RUNNING and not run_id:
            raise ValidationFailed.field("run_id", "is required with outcome running")
        async with self._store.write() as tx:
            firing = await tx.get_firing(firing_id) if firing_id else None
            if firing is None:
                raise ScheduleFiringNotFound("schedule firing not found")
            if outcome == RUNNING and firing.outcome == CANCELLED and not firing.run_id:
                # Cancelled by the next firing while it was starting: its run goes as it starts.
                await tx.interrupt_run(run_id)
                await tx.update_firing(firing.model_copy(update={"run_id": run_id}), outcome_was=CANCELLED)
                return
            if firing.outcome not in (PENDING, RUNNING) or (outcome == RUNNING and firing.outcome != PENDING):
                return
            changes: dict[str, object] = {"outcome": outcome, "error": error[:2000]}
            if run_id:
                changes["run_id"] = run_id
            if outcome != RUNNING:
                changes["ended_at"] = self._clock()
            await tx.update_firing(firing.model_copy(update=changes), outcome_was=firing.outcome)

    async def _claim_due(self, schedule_id: str, now: datetime) -> ClaimedFiring | None:
        async with self._store.write() as tx:
            schedule = await tx.get_schedule(schedule_id)
            due_at = schedule.next_fire_at if schedule else None
            if schedule is None or due_at is None or due_at > now or not schedule.enabled:
                return None
            following = next_fire_at(schedule.cron, schedule.time_zone, after=max(now, due_at))
            if not await tx.advance_schedule(schedule.id, due_at, following):
                return None  # another gateway claimed this due time first
            firing = ScheduleFiring(
                id=str(uuid.uuid4()),
                schedule_id=schedule.id,
                due_at=due_at,
                outcome=PENDING,
                session_id=_session(schedule),
                fired_at=now,
            )
            if now - due_at > self._missed_grace and schedule.missed_policy == "skip":
                await tx.insert_firing(_ended(firing, SKIPPED_MISSED, now))
                return None
            previous = await self._open(tx, schedule.id, now)
            if previous and schedule.overlap_policy == "skip":
                await tx.insert_firing(_ended(firing, SKIPPED_OVERLAP, now))
                return None
            if previous and schedule.overlap_policy == "queue":
                await tx.insert_firing(firing.model_copy(update={"outcome": QUEUED}))
                return None
            if previous:  # cancel_previous
                for earlier in previous:
                    if earlier.run_id:
                        await tx.interrupt_run(earlier.run_id)
                    await tx.update_firing(_ended(earlier, CANCELLED, now), outcome_was=earlier.outcome)
            await tx.insert_firing(firing)
            return await _claimed(tx, schedule, firing, now)

    async def _release_queued(self, schedule_id: str, now: datetime) -> ClaimedFiring | None:
        """The schedule's oldest queued firing, handed out once nothing of the schedule runs."""
        async with self._store.write() as tx:
            schedule = await tx.get_schedule(schedule_id)
            open_firings = await self._open(tx, schedule_id, now)
            if schedule is None or not open_firings or open_firings[0].outcome != QUEUED:
                return None
            queued = open_firings[0]
            firing = queued.model_copy(update={"outcome": PENDING, "fired_at": now})
            if not await tx.update_firing(firing, outcome_was=QUEUED):
                return None
            return await _claimed(tx, schedule, firing, now)

    async def _open(self, tx: StoreTransaction, schedule_id: str, now: datetime) -> list[ScheduleFiring]:
        """The schedule's firings still open, oldest first: queued ones, ones claimed and starting
        (for a while), and running ones whose run is in flight."""
        found: list[ScheduleFiring] = []
        for firing in await tx.open_firings(schedule_id):
            if (
                firing.outcome == QUEUED
                or (firing.outcome == PENDING and now - firing.fired_at < self._start_timeout)
                or (firing.outcome == RUNNING and await tx.run_in_flight(firing.run_id))
            ):
                found.append(firing)
        return found


def _session(schedule: Schedule) -> str:
    if schedule.session_policy == "continue":
        return schedule.session_id or session_for(schedule.id)
    return uuid.uuid4().hex


def _ended(firing: ScheduleFiring, outcome: str, now: datetime) -> ScheduleFiring:
    return firing.model_copy(update={"outcome": outcome, "ended_at": now})


async def _claimed(
    tx: StoreTransaction, schedule: Schedule, firing: ScheduleFiring, now: datetime
) -> ClaimedFiring | None:
    project = await tx.get_project(project_id=schedule.project_id)
    creator = await tx.get_user(schedule.created_by)
    if project is None or creator is None or not creator.is_active:
        # Its runs run as its creator: one who is gone or deactivated runs nothing any more.
        logger.warning("schedule %s: its creator is gone or inactive; not fired", schedule.id)
        failed = _ended(firing, FAILED, now).model_copy(
            update={"error": "the schedule's creator is inactive"}
        )
        await tx.update_firing(failed, outcome_was=firing.outcome)
        return None
    message = render(schedule.message, schedule.time_zone, scheduled_for=firing.due_at, now=now)
    return ClaimedFiring(
        firing=firing, schedule=schedule, project_slug=project.slug, message=message, creator=creator
    )
