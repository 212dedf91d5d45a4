"""Appending to a session: what a batch may hold, idempotency by key, optimistic concurrency on
the session's last seq, the fence that refuses a step of a run that has ended (fence.py), and the
project's stored_bytes limit (storage_quota.py).

`Appends` is the append half of `memory.EventLog`, which hands every append to it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime

from agentmesh.memory.errors import (
    EventTooLarge,
    ExpectedLastSeqMismatch,
    FieldViolation,
    IdempotencyKeyContention,
    IdempotencyKeyReused,
    TooManyEvents,
    ValidationFailed,
)
from agentmesh.memory.event_store import EventStore, FenceRefused, IdempotencyKeyRace
from agentmesh.memory.fence import conflict_refusal, fence_keys, refusal
from agentmesh.memory.models import AppendResult, Event, NewEvent, Session
from agentmesh.memory.storage_quota import StoredBytesQuota
from agentmesh.memory.validation import check_id, event_bytes, event_violations, events_valid
from agentmesh.memory.watch import SessionSignals
from agentmesh.runtime import metrics

# Attempts of an append whose idempotency key a concurrent append stored first: the second
# attempt finds the key and returns the stored event.
_APPEND_ATTEMPTS = 3


class Appends:
    """Stores batches of events into sessions; `find` looks a session up by id alone (for an
    append that does not name its project)."""

    def __init__(
        self,
        store: EventStore,
        signals: SessionSignals,
        *,
        find: Callable[[str, str], Awaitable[Session | None]],
        max_event_bytes: int,
        max_batch_events: int,
        clock: Callable[[], datetime],
        quota: StoredBytesQuota | None = None,
    ) -> None:
        self._store = store
        self._quota = quota  # the projects' stored_bytes limits (none: unlimited)
        self._signals = signals
        self._find = find
        self._max_event_bytes = max_event_bytes
        self._max_batch_events = max_batch_events
        self._clock = clock

    async def append(
        self,
        session_id: str,
        project_id: str,
        events: Sequence[NewEvent],
        *,
        expected_last_seq: int | None = None,
    ) -> AppendResult:
        """Stores the batch atomically after the session's last event, creating the session on
        first use. Events whose idempotency key is already stored are not stored again: the
        result holds the stored ones in their place. A step of a run that has ended is refused
        (fence.py)."""
        self._validate_append(session_id, project_id, events, expected_last_seq)
        if not project_id:
            existing = await self._find(session_id, "")
            if existing is None:
                raise ValidationFailed.of(
                    [FieldViolation("project_id", f"is required: session {session_id!r} is new")]
                )
            project_id = existing.project_id
        if self._quota is not None:
            await self._quota.check(project_id, events)
        keys = [event.idempotency_key for event in events if event.idempotency_key]
        # Optimistic: the first attempt writes without looking the keys up (a retry is rare, and
        # the unique index on the keys catches it: nothing is written then). Only an attempt after
        # a key collision — or after expected_last_seq failed, which a retry of an applied append
        # must not see — looks them up and answers with the stored events.
        look_up = False
        fenced_by: Mapping[str, Event] = {}  # the fence keys the last attempt was refused by
        for _ in range(_APPEND_ATTEMPTS + 1):
            known = (
                await self._store.events_by_idempotency_key(session_id, project_id, keys) if look_up else {}
            )
            session: Session | None = None
            if known:
                session = await self._store.get_session(session_id, project_id)
            for index, event in enumerate(events):
                original = known.get(event.idempotency_key) if event.idempotency_key else None
                if original is not None and not event.same_payload(original):
                    raise conflict_refusal(index, event, fenced_by) or IdempotencyKeyReused(
                        index, event.idempotency_key, original.id
                    )
            fresh = [
                event for event in events if not event.idempotency_key or event.idempotency_key not in known
            ]
            if not fresh:
                # Every event retries a stored one: answer as the first time, whatever
                # expected_last_seq says now (the first attempt is what it applied to).
                return AppendResult(
                    events=[known[event.idempotency_key] for event in events],
                    last_seq=session.last_seq if session is not None else 0,
                )

            def admit(session_project: str, last_seq: int) -> None:
                if expected_last_seq is not None and last_seq != expected_last_seq:
                    raise ExpectedLastSeqMismatch(session_id, expected_last_seq, last_seq)

            started = time.perf_counter()
            try:
                stored, last_seq = await self._store.append(
                    session_id,
                    project_id,
                    fresh,
                    now=self._clock(),
                    admit=admit,
                    expected_last_seq=expected_last_seq,
                    fence=fence_keys(events, stored=known.keys()),
                )
            except IdempotencyKeyRace:
                look_up = True
                continue
            except FenceRefused as fenced:
                fenced_by = fenced.found
                if keys and not look_up:
                    look_up = True  # a retry of events stored before the fence is answered
                    continue
                refused = refusal(events, fenced.found, stored=known.keys())
                metrics.record_memory_append(
                    seconds=time.perf_counter() - started, events=len(fresh), outcome="error"
                )
                if refused is None:  # cannot be: the store found a fence key of one of these runs
                    raise
                raise refused from None
            except ExpectedLastSeqMismatch:
                if keys and not look_up:
                    look_up = True
                    continue
                metrics.record_memory_append(
                    seconds=time.perf_counter() - started, events=len(fresh), outcome="error"
                )
                raise
            except BaseException:
                metrics.record_memory_append(
                    seconds=time.perf_counter() - started, events=len(fresh), outcome="error"
                )
                raise
            metrics.record_memory_append(seconds=time.perf_counter() - started, events=len(stored))
            if self._quota is not None:
                self._quota.stored(project_id, sum(event_bytes(event) for event in stored))
            self._signals.notify((project_id, session_id))
            new = iter(stored)
            in_order = [known[e.idempotency_key] if e.idempotency_key in known else next(new) for e in events]
            return AppendResult(events=in_order, last_seq=last_seq)
        raise IdempotencyKeyContention(
            f"concurrent appends to session {session_id!r} keep racing on the same idempotency keys; retry"
        )

    def _validate_append(
        self, session_id: str, project_id: str, events: Sequence[NewEvent], expected_last_seq: int | None
    ) -> None:
        violations: list[FieldViolation] = []
        check_id(session_id, "session_id", violations, required=True)
        check_id(project_id, "project_id", violations, required=False)
        if expected_last_seq is not None and expected_last_seq < 0:
            violations.append(FieldViolation("expected_last_seq", "must not be negative"))
        if not events:
            violations.append(FieldViolation("events", "at least one event is required"))
        if not events_valid(events):
            violations += event_violations(events)
        if violations:
            raise ValidationFailed.of(violations)
        if len(events) > self._max_batch_events:
            raise TooManyEvents(len(events), self._max_batch_events)
        for index, event in enumerate(events):
            size = event_bytes(event)
            if size > self._max_event_bytes:
                raise EventTooLarge(index, size, self._max_event_bytes)
