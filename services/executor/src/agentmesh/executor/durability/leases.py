"""This executor's side of run leases (DESIGN §5, durability; the registry's side is registry
`leases.py`).

`LeaseKeeper` renews, in one `RenewRunLeases` call every few seconds, the lease of every run this
executor holds: runs in flight, runs whose end the finisher has not delivered yet, and orphans it
is closing. The registry's answer names runs it lost (it was cut off longer than the lease time
and the runs were taken over: they stop here) and orphans it now holds: runs of executors that
died, which `OrphanCloser` closes in their session's log; and runs a newer message of their
session interrupts (double texting, registry `turns.py`), which stop here.

An orphan is resumed from its log where it can be (resumption.py, `RunResumer`, which the keeper
is given as its closer); otherwise it is closed (docs/durability.md). Closing an orphan: every
`delegation_request` it recorded gets its `delegation_response` (outcome `failed`) and the run its
one final `error` (reason `EXECUTOR_LOST`), both under the same idempotency keys the run itself
would have used (recorder.end_key, response_key), so whatever the dead executor recorded first
stands and nothing is recorded twice. A run with no event in the log (it died before recording
its input) needs nothing. Then the orphan is reported closed on the next renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from agentmesh.executor.durability.child_log import is_final
from agentmesh.executor.durability.outbox import is_superseded, is_taken
from agentmesh.executor.durability.recorder import RESUME, EventType, end_key, response_key, resumes
from agentmesh.executor.errors import EXECUTOR_LOST
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.protos import struct
from agentmesh.runtime.telemetry import untraced

logger = logging.getLogger(__name__)

RunKey = tuple[str, str]  # (agent id, run id)
# Runs (and closed runs) one RenewRunLeases call may name: the registry's MAX_LEASED_RUNS.
MAX_RUNS_PER_RENEWAL = 1000
# How long an executor that has not heard the registry's lease time yet waits before it counts
# itself cut off (the registry's default lease).
_FIRST_LEASE_SECONDS = 10.0
# How long an orphan handed back to the executor that lost it waits for that run to stop here.
_STOP_WAIT_SECONDS = 10.0
_INPUT_TYPES = (EventType.EVENT_TYPE_USER_MESSAGE, EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED)


class OrphanCloser:
    """Closes a run whose executor died: see the module's docstring."""

    def __init__(self, memory: MemoryClient, *, system_metadata: Callable[[], Metadata | None]) -> None:
        self._memory = memory
        self._system_metadata = system_metadata

    async def close(
        self,
        orphan: registry_internal_service_pb2.OrphanedRun,
        *,
        events: list[resources_pb2.Event] | None = None,
        reason: str = EXECUTOR_LOST,
        message: str = "",
    ) -> None:
        """Closes the orphan with `reason` (its run's `events`, read here unless given); one
        cancelled while it waited (`cancelled_by`) with the end a cancelled run records
        (run/end.py `record_cancelled`), its open delegations answered `cancelled`."""
        cancelled = orphan.cancelled_by
        if cancelled:
            message = f"the run was cancelled: cancelled by {cancelled}"
        message = message or _LOST
        if events is None:
            events = await self.run_events(orphan)
        if not events:
            return
        input_event = next((e for e in events if e.event_type in _INPUT_TYPES), events[0])
        # Ended as the run's latest incarnation, so that the end is refused should another
        # executor have resumed the run after these events were read (memory `fence.py`).
        incarnation = resumes(events)
        end = _event(
            orphan,
            EventType.EVENT_TYPE_ERROR,
            message,
            metadata={
                **(
                    {"cancelled": True, "code": "CANCELLED", "reason": f"cancelled by {cancelled}"}
                    if cancelled
                    else {"reason": reason, "code": "UNAVAILABLE"}
                ),
                **({RESUME: incarnation} if incarnation else {}),
            },
            parent_event_id=input_event.id,
            delegation_id=input_event.delegation_id,
            idempotency_key=end_key(orphan.run_id),
        )
        await self._append_each(orphan, [*_responses(orphan, events, message), end])
        await self.answer_strays(orphan, message=message)

    async def answer_strays(self, orphan: registry_internal_service_pb2.OrphanedRun, *, message: str) -> None:
        """Once the taken-over run's end is stored, answers `failed` every `delegation_request`
        of it still without a response. The executor that lost the run may have gone on with it
        for a moment after its taker read the log (it learns of the loss at its next renewal),
        and recorded a request nobody else knows of. After the end the log is complete: memory
        refuses the run's steps from then on (the fence). Nothing when the end is not stored
        (kept in an outbox): its keeper's run is still the one that answers."""
        events = await self.run_events(orphan)
        if any(is_final(event) for event in events):
            await self._append_each(orphan, _responses(orphan, events, message))

    async def run_events(
        self, orphan: registry_internal_service_pb2.OrphanedRun
    ) -> list[resources_pb2.Event]:
        """The orphan's events in the log, in order (none when its session does not exist)."""
        request = memory_service_pb2.ListEventsRequest(
            session_id=orphan.session_id, project_id=orphan.project_id, run_id=orphan.run_id
        )
        try:
            return [e async for e in self._memory.iter_events(request, metadata=self._system_metadata())]
        except DomainError as error:
            if error.code.name == "NOT_FOUND":  # no session yet: the run recorded nothing
                return []
            raise

    async def _append_each(
        self, orphan: registry_internal_service_pb2.OrphanedRun, new: list[memory_service_pb2.NewEvent]
    ) -> None:
        """One at a time: a key the run itself recorded already is refused alone."""
        for event in new:
            try:
                await self._memory.append_events(
                    orphan.session_id, orphan.project_id, [event], metadata=self._system_metadata()
                )
            except DomainError as error:
                if not (is_taken(error) or is_superseded(error)):  # settled by the run, or its taker
                    raise


def _responses(
    orphan: registry_internal_service_pb2.OrphanedRun, events: list[resources_pb2.Event], message: str
) -> list[memory_service_pb2.NewEvent]:
    """A `failed` (or, for a cancelled run, `cancelled`) response to each of the run's delegation
    requests that has none."""
    outcome = "cancelled" if orphan.cancelled_by else "failed"
    responded = {e.delegation_id for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE}
    return [
        _event(
            orphan,
            EventType.EVENT_TYPE_DELEGATION_RESPONSE,
            {"agent": target, "outcome": outcome, "content": f"{target} {outcome}: {message}"},
            metadata={"target_agent": target, "outcome": outcome},
            parent_event_id=event.id,
            delegation_id=event.delegation_id,
            idempotency_key=response_key(event.delegation_id),
        )
        for event in events
        if event.event_type == EventType.EVENT_TYPE_DELEGATION_REQUEST
        and event.delegation_id not in responded
        for target in [_target(event)]
    ]


_LOST = "the executor running this run stopped before it finished (its lease expired)"


def _target(event: resources_pb2.Event) -> str:
    try:
        return str(json.loads(event.content).get("agent", ""))
    except (ValueError, AttributeError):
        return ""


def _event(
    orphan: registry_internal_service_pb2.OrphanedRun,
    event_type: EventType.ValueType,
    content: str | dict[str, str],
    *,
    metadata: dict[str, Any],
    parent_event_id: str,
    delegation_id: str,
    idempotency_key: str,
) -> memory_service_pb2.NewEvent:
    new = memory_service_pb2.NewEvent(
        agent=orphan.agent_name,
        event_type=event_type,
        content=content if isinstance(content, str) else json.dumps(content),
        run_id=orphan.run_id,
        parent_event_id=parent_event_id,
        delegation_id=delegation_id,
        idempotency_key=idempotency_key,
    )
    new.metadata.CopyFrom(struct({**metadata, "taken_over": True}))
    return new


class Closer(Protocol):
    async def close(self, orphan: registry_internal_service_pb2.OrphanedRun) -> None: ...


class LeaseKeeper:
    """Renews this executor's run leases and closes (or resumes) the orphans it is handed, in a
    background task from `start` to `stop`."""

    def __init__(
        self,
        registry: RegistryClient,
        closer: Closer,
        *,
        executor_id: str,
        held: Callable[[], list[RunKey]],
        lose: Callable[[str], asyncio.Task[Any] | None],
        interrupt: Callable[[str], None],
        system_metadata: Callable[[], Metadata | None],
        interval_seconds: float,
        max_orphans: int,
        on_cut_off: Callable[[bool], Awaitable[None]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._on_cut_off = on_cut_off
        self._monotonic = monotonic
        self._renewed_at = monotonic()  # the last renewal the registry answered (from the start)
        self._lease_seconds = 0.0  # as the registry last said (0: not heard yet)
        self.cut_off = False
        self._closer = closer
        self._executor_id = executor_id
        self._held = held
        self._lose = lose
        self._interrupt = interrupt
        self._system_metadata = system_metadata
        self._interval = interval_seconds
        self._max_orphans = max_orphans
        self._closing: dict[RunKey, asyncio.Task[None]] = {}
        self._closed: list[RunKey] = []
        self._released: set[RunKey] = set()
        # Runs the registry said this executor lost: not renewed (nor warned about) again while
        # something here still holds them (the finisher delivering their end).
        self._lost: set[RunKey] = set()
        # Lost runs still stopping here: one handed straight back as an orphan is resumed (or
        # closed) only once it has stopped, so that its steps and its taker's do not interleave.
        self._stopping: dict[RunKey, asyncio.Task[Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._taking_over = True  # off while draining: a stopping executor takes on nothing
        self._woken = asyncio.Event()  # renew now, without waiting for the interval (`wake`)

    def start(self) -> None:
        with untraced():
            self._task = asyncio.create_task(self._keep(), name="run lease keeper")

    async def stop(self) -> None:
        tasks = [task for task in (self._task, *self._closing.values()) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None

    def wake(self) -> None:
        """Renews at once (a suspended run may be ready to be taken over) rather than at the
        next interval."""
        self._woken.set()

    def stop_taking_over(self) -> None:
        """Draining: no more orphans are asked for (a stopping executor takes on nothing)."""
        self._taking_over = False

    async def release(self, runs: Sequence[RunKey]) -> None:
        """Hands runs over (graceful drain): their leases end now, so another executor takes
        them over and resumes them without waiting for them to expire."""
        if runs:
            self.stop_taking_over()
            self._released.update(runs)  # never renewed again, whatever still holds them here
            await self.renew(released=runs)

    async def renew(self, *, released: Sequence[RunKey] = ()) -> float:
        """One renewal: how long the registry's leases last (0 when it could not be asked). More
        runs than one `RenewRunLeases` may name (the registry takes at most
        `MAX_RUNS_PER_RENEWAL`) go in several calls: an executor holding 5,000 runs renewed none
        of them in one call the registry refused as too large. Notes whether the executor
        is cut off (`_heard`)."""
        lease_seconds = await self._renew(released)
        await self._heard(lease_seconds)
        return lease_seconds

    async def _renew(self, released: Sequence[RunKey]) -> float:
        closed, self._closed = self._closed, []

        def leased(runs: Iterable[RunKey]) -> list[registry_internal_service_pb2.LeasedRun]:
            return [registry_internal_service_pb2.LeasedRun(agent_id=a, run_id=r) for a, r in runs]

        holding = {*self._held(), *self._closing}
        self._lost &= holding
        held = leased(holding - self._released - self._lost)
        closed_runs, released_runs = leased(closed), leased(released)
        longest = max(len(held), len(closed_runs), len(released_runs), 1)
        lease_seconds = 0.0
        for index, start in enumerate(range(0, longest, MAX_RUNS_PER_RENEWAL)):
            end = start + MAX_RUNS_PER_RENEWAL
            request = registry_internal_service_pb2.RenewRunLeasesRequest(
                executor_id=self._executor_id,
                runs=held[start:end],
                closed=closed_runs[start:end],
                # Orphans are taken over once per renewal, not once per call.
                max_orphans=self._max_orphans if self._taking_over and index == 0 else 0,
                released=released_runs[start:end],
            )
            try:
                response = await self._registry.renew_run_leases(
                    request,
                    metadata=self._system_metadata(),
                    # An answer after the lease it renews has run out is no use: ask again.
                    timeout=self._lease_seconds or _FIRST_LEASE_SECONDS,
                )
            except DomainError as error:
                self._closed.extend(closed[start:])
                logger.warning("could not renew the leases of executor %s: %s", self._executor_id, error)
                return 0.0
            self._take(response)
            lease_seconds = min(lease_seconds or response.lease_seconds, response.lease_seconds)
        return lease_seconds

    async def count_in(self, orphan: registry_internal_service_pb2.OrphanedRun) -> bool:
        """Counts `orphan` in again as this executor's (`count_in`)."""
        return await count_in(
            self._registry, orphan, executor_id=self._executor_id, metadata=self._system_metadata()
        )

    def _take(self, response: registry_internal_service_pb2.RenewRunLeasesResponse) -> None:
        """What a renewal answered: runs lost or interrupted here, orphans to close."""
        # Orphans handed (back) to this executor by this very renewal.
        reclaimed = {(orphan.agent_id, orphan.run_id) for orphan in response.orphans}
        holding = {*self._held(), *self._closing}
        for lost in response.lost:
            key = (lost.agent_id, lost.run_id)
            if key not in holding:
                # Ended here while the renewal was on its way (its end delivered, so its lease row
                # is gone): nothing was taken over, and there is nothing to stop.
                continue
            if key in self._closing and key in reclaimed:
                continue  # orphaned while it was resumed or closed here, and handed straight back
            # An orphan being resumed here that went to another executor is a run like any other
            # (`_closing` holds it until its end): it stops. One only being closed has nothing to
            # stop.
            if key not in self._lost:
                self._lost.add(key)
                stopping = self._lose(lost.run_id)
                if stopping is None:
                    # Not running here: only its end is held (the finisher's call crossed the
                    # renewal), or it is an orphan only being closed. Nothing to stop.
                    continue
                logger.warning("run %s was taken over (lease lost): stopping it here", lost.run_id)
                if not stopping.done():
                    self._stopping[key] = stopping
                    stopping.add_done_callback(lambda _, key=key: self._stopping.pop(key, None))
        for interrupted in response.interrupted:
            self._interrupt(interrupted.run_id)
        for orphan in response.orphans:
            key = (orphan.agent_id, orphan.run_id)
            if key not in self._closing:
                self._closing[key] = asyncio.create_task(
                    self._close(key, orphan), name=f"close {orphan.run_id}"
                )

    async def _keep(self) -> None:
        while True:
            self._woken.clear()
            lease_seconds = await self.renew()
            interval = min(self._interval, lease_seconds / 3) if lease_seconds else min(self._interval, 1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), interval)

    async def _heard(self, lease_seconds: float) -> None:
        """Notes how the last renewal went. An executor whose renewals have failed for longer
        than a lease is cut off: its runs are being taken over elsewhere, and so would any run it
        started now, once it starts at all (its start waits for the registry). It says so
        (`on_cut_off(True)`: the executor reports NOT_SERVING, and gateways and peers send their
        runs to other executors first) until a renewal is answered again."""
        now = self._monotonic()
        if lease_seconds:
            self._renewed_at, self._lease_seconds = now, lease_seconds
        cut_off = not lease_seconds and now - self._renewed_at > (self._lease_seconds or _FIRST_LEASE_SECONDS)
        if cut_off == self.cut_off:
            return
        self.cut_off = cut_off
        if cut_off:
            logger.warning(
                "executor %s has renewed no lease for %.0f s, longer than a lease: its runs are taken "
                "over elsewhere; it reports NOT_SERVING until the registry answers again",
                self._executor_id,
                now - self._renewed_at,
            )
        else:
            logger.info("executor %s renews its leases again: serving", self._executor_id)
        if self._on_cut_off is not None:
            await self._on_cut_off(cut_off)

    async def _close(self, key: RunKey, orphan: registry_internal_service_pb2.OrphanedRun) -> None:
        if (stopping := self._stopping.get(key)) is not None:
            await asyncio.wait({stopping}, timeout=_STOP_WAIT_SECONDS)
        try:
            await self._closer.close(orphan)
        except Exception as error:  # memory down: the orphan's lease lapses and it is handed out again
            logger.warning("could not close orphaned run %s: %s", orphan.run_id, error)
        else:
            logger.info("closed orphaned run %s of %s", orphan.run_id, orphan.agent_name)
            self._closed.append(key)
            if orphan.cancelled_by:  # the runs parked on it, and its session, wait for the report
                self.wake()
        finally:
            self._closing.pop(key, None)


async def count_in(
    registry: RegistryClient,
    orphan: registry_internal_service_pb2.OrphanedRun,
    *,
    executor_id: str,
    metadata: Metadata | None,
) -> bool:
    """Tells the registry that executor `executor_id` resumes `orphan` (it was handed it to
    close): the run counts in flight again (its agent `working`) until its end, which the
    finisher then delivers as any run's, usage and completed task counted once. False when the
    executor does not hold it (any more): it must not resume it. Raises DomainError when the
    registry cannot be asked: the orphan is then left to lapse and be handed out again."""
    run = registry_internal_service_pb2.LeasedRun(agent_id=orphan.agent_id, run_id=orphan.run_id)
    request = registry_internal_service_pb2.RenewRunLeasesRequest(executor_id=executor_id, resumed=[run])
    response = await registry.renew_run_leases(request, metadata=metadata)
    return not any(lost.run_id == orphan.run_id for lost in response.lost)
