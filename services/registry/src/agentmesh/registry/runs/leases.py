"""Run leases (DESIGN §5, durability): an executor holds a lease on each run it executes and
renews them all in one call every few seconds (`RenewRunLeases`). A lease not renewed within
`run_lease_seconds` expires: the sweeper orphans the run — it stops counting as in flight, so the
agent goes idle when it was its last run — and a live executor takes it over through its next
renewal's answer, to resume it from the session's log or close it there (executor `leases.py`,
`resumption.py`). So an agent is never left `working` by a dead executor for longer than the
lease time plus one sweep. A taker that resumes the run says so (`resumed`): the run counts in
flight again until its end, which is then a normal finish (its usage and completed task counted
once); a run closed instead stays counted out.

After the registry itself (re)starts, the runs of an executor expire only once that executor has
renewed something through it (then it renews all it holds), or once `startup_grace_seconds`
passed: executors that kept running through a registry outage may take a while to reconnect
(gRPC's reconnect backoff), and their runs must not be taken from them meanwhile. The same grace
starts again when the registry's database comes back from an outage: no renewal could be written
while it was away, so every lease looks expired the moment it is back, although the executors
holding them are alive and go on renewing within a second. Taking their runs then would have two
executors run each of them until the next renewal told the first one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agentmesh.registry.store import OrphanedRun, RunKey, RunLease, RunLeaseStore
from agentmesh.runtime.background import BackgroundTask
from agentmesh.runtime.database_errors import DATABASE_UNAVAILABLE, database_unavailable
from agentmesh.runtime.errors import FieldViolation, ValidationFailed

logger = logging.getLogger(__name__)

# Orphans one renewal may take over, and runs one renewal may name (as FinishAgentRuns).
MAX_ORPHANS_PER_CALL = 100
MAX_LEASED_RUNS = 1000


@dataclass(frozen=True)
class Renewal:
    """What a renewal gives back: the runs the executor lost, the orphans it now holds, and its
    runs a newer message of their session interrupts (double texting, `turns.py`)."""

    lost: list[RunKey]
    orphans: list[OrphanedRun]
    lease_seconds: float
    interrupted: list[RunKey] = field(default_factory=list)


class RunLeases:
    """Grants, renews and expires runs' leases, and hands orphaned runs to live executors."""

    def __init__(
        self,
        store: RunLeaseStore,
        *,
        lease_seconds: float,
        startup_grace_seconds: float,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
        runs_ready: Callable[[], None] | None = None,
    ) -> None:
        # Tells watching executors that runs parked on a closed run are due (`AgentWatch`).
        self._runs_ready = runs_ready
        self._startup_grace = startup_grace_seconds
        self._heard: set[str] = set()  # executors that renewed since this registry started
        self._store = store
        self._lease = timedelta(seconds=lease_seconds)
        self.lease_seconds = lease_seconds
        self._now = clock
        self._monotonic = monotonic
        self._started = monotonic()
        self._sweeper: BackgroundTask | None = None

    def grant(self, session_id: str, executor_id: str) -> RunLease | None:
        """The lease a run starting now gets; None for a caller that names no executor (it then
        holds no lease, as before leases existed, and nothing expires it)."""
        if not executor_id:
            return None
        return RunLease(session_id=session_id, executor_id=executor_id, expires_at=self._now() + self._lease)

    async def renew(
        self,
        executor_id: str,
        runs: Sequence[RunKey],
        *,
        closed: Sequence[RunKey] = (),
        max_orphans: int = 0,
        released: Sequence[RunKey] = (),
        resumed: Sequence[RunKey] = (),
    ) -> Renewal:
        """Renews `runs`, forgets `closed` orphans, ends the leases of `released` runs at once
        (a draining executor hands them over: the next sweep orphans them), counts the orphans it
        `resumed` in flight again (their end is then a normal finish, usage counted), and hands
        out up to `max_orphans` orphans. `resumed` runs it does not hold come back `lost`."""
        violations = []
        if not executor_id:
            violations.append(FieldViolation("executor_id", "is required"))
        for name, keys in (("runs", runs), ("closed", closed), ("released", released), ("resumed", resumed)):
            if len(keys) > MAX_LEASED_RUNS:
                violations.append(FieldViolation(name, f"must hold at most {MAX_LEASED_RUNS} runs"))
            for index, (agent_id, run_id) in enumerate(keys):
                if not agent_id or not run_id:
                    violations.append(FieldViolation(f"{name}[{index}]", "needs agent_id and run_id"))
        if max_orphans < 0:
            violations.append(FieldViolation("max_orphans", "must not be negative"))
        if violations:
            raise ValidationFailed.of(violations)
        try:
            return await self._renew(executor_id, runs, closed, max_orphans, released, resumed)
        except Exception as error:
            self._if_database_away(error)
            raise

    async def _renew(
        self,
        executor_id: str,
        runs: Sequence[RunKey],
        closed: Sequence[RunKey],
        max_orphans: int,
        released: Sequence[RunKey],
        resumed: Sequence[RunKey],
    ) -> Renewal:
        now = self._now()
        if closed and await self._store.close(executor_id, closed, now) and self._runs_ready is not None:
            self._runs_ready()
        if released:
            await self._store.renew(executor_id, released, now - self._lease)
        lost = await self._store.resume(executor_id, resumed, now, now + self._lease) if resumed else []
        lost += [
            run for run in await self._store.renew(executor_id, runs, now + self._lease) if run not in lost
        ]
        # Heard only once its renewal is written: a sweep between the two (after a registry
        # restart, the executor's leases are all past) would expire the very runs it renews.
        self._heard.add(executor_id)
        orphans = await self._store.claim(
            executor_id, now, now + self._lease, min(max_orphans, MAX_ORPHANS_PER_CALL)
        )
        interrupted = await self._store.interrupted(executor_id) if runs else []
        return Renewal(lost=lost, orphans=orphans, lease_seconds=self.lease_seconds, interrupted=interrupted)

    async def expire(self) -> int:
        """Orphans the runs whose lease expired: during the startup grace, only those of executors
        that renewed since the start (see the module's docstring)."""
        if self._monotonic() - self._started < self._startup_grace:
            return await self._store.expire(self._now(), executor_ids=set(self._heard))
        return await self._store.expire(self._now())

    def _if_database_away(self, error: BaseException) -> bool:
        """The grace of a start again, when `error` says the database is away (see the module's
        docstring): the runs of an executor expire once it renewed after the database is back.
        Whether it did say so."""
        away = database_unavailable(error, "registry")
        if away is None or away.reason != DATABASE_UNAVAILABLE:
            return False
        self._heard.clear()
        self._started = self._monotonic()
        return True

    def start_sweeper(self, interval_seconds: float) -> None:
        self._started = self._monotonic()  # the grace counts from serving, not from building
        self._sweeper = sweeper = BackgroundTask(
            "run lease sweeper", lambda: self._sweep(sweeper, interval_seconds)
        )
        sweeper.start()

    async def stop(self) -> None:
        if self._sweeper is not None:
            await self._sweeper.stop()

    async def _sweep(self, sweeper: BackgroundTask, interval_seconds: float) -> None:
        while True:
            try:
                if expired := await self.expire():
                    logger.warning("%d runs lost their executor (lease expired): orphaned", expired)
            except Exception as error:  # the sweeper outlives a database outage; the next sweep retries
                if self._if_database_away(error):
                    logger.warning("could not expire runs' leases: the database is away")
                else:
                    logger.exception("could not expire runs' leases")
            await sweeper.pause(interval_seconds)
