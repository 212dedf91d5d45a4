"""Fencing of a run's events once it has ended, or once another executor took it over
(docs/durability.md).

**After its end.** A run's final event carries the idempotency key `<run_id>:end` (the executor's
`recorder.end_key`), whoever records it: the run, its cancellation, or the executor that took it
over. An executor cut off from the registry past its lease may still be running a run that was
closed meanwhile; its steps would land after the run's final event. So an append is refused
(`RUN_ENDED`) when one of its new events is a step of a run whose `<run_id>:end` is stored.

**After a takeover.** A run resumed by another executor is its next *incarnation*: the taker
records a `RUN_RESUMED` note under the key `<run_id>:resumed:<n>` (n counts the resumes, from 1)
before it reads the run's log, and every event of the resumed run carries `resume: n` in its
metadata (none, or 0, for the run as first started). An event of incarnation n is refused
(`RUN_TAKEN_OVER`) once `<run_id>:resumed:<n+1>` is stored: the executor that lost the run can then
record nothing more of it — no tool call's intent, so no tool call; no end — and the taker's read
after its note sees all it did. Nor can it start another run for it: a delegated or sub-agent
run's input names its caller's run and incarnation (`caller_run_id`, `caller_resume`), and is
refused the same way once the caller's next note is stored — the run is never started.

Not fenced, either way:
- a `delegation_response`: every `delegation_request` recorded before must keep exactly one
  response, and a response has its own key (`<delegation_id>:response`);
- an event that is already stored (a retry of an append that landed before): answered as stored,
  like any retry — the caller looks the keys up first (`EventLog.append`). But an event whose key
  names another event, and which the fence refuses, gets the fence's refusal, not the key's
  (`conflict_refusal`): the lost incarnation's end, once the taker's end holds the key, is told
  the run was taken over.
And a run's end is not fenced by its own end (the same key: a retry, or a second end, which the
key already settles), only by a takeover.

The check is made by the store, atomically with the write (`EventStore.append`'s `fence`): under
the session's lock that assigns `seq`, so an event racing the end or the note that fences it lands
before it, or is refused. This module says which keys an append is fenced by, and turns the ones
the store found into the refusal.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from agentmesh.memory.errors import FailedPrecondition, RunEnded, RunTakenOver
from agentmesh.memory.models import Event, EventType, NewEvent

_NOT_FENCED = (EventType.DELEGATION_RESPONSE,)
# The metadata that names a resumed run's incarnation (the executor's Recorder sets it), and
# those of a child run's input that name its caller's run and incarnation (executor admission).
RESUME = "resume"
CALLER_RUN_ID = "caller_run_id"
CALLER_RESUME = "caller_resume"


END_KEY_SUFFIX = ":end"


def end_key(run_id: str) -> str:
    """The idempotency key of a run's one final event (as the executor's `recorder.end_key`)."""
    return run_id + END_KEY_SUFFIX


def resumed_key(run_id: str, resume: int) -> str:
    """The idempotency key of the note the taker of a run's `resume`th incarnation records first."""
    return f"{run_id}:resumed:{resume}"


def incarnation(event: NewEvent, name: str = RESUME) -> int:
    """Which incarnation of its run recorded `event` (of its caller's run, with `name`
    CALLER_RESUME): that metadata, 0 when absent or not a whole number (as an event recorded before
    runs were resumed)."""
    value = event.metadata.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 0:
        return 0
    return int(value)


def _caller(event: NewEvent) -> str:
    caller = event.metadata.get(CALLER_RUN_ID)
    return caller if isinstance(caller, str) else ""


def _fenced(event: NewEvent, stored: Collection[str]) -> bool:
    return bool(event.run_id and event.idempotency_key not in stored and event.event_type not in _NOT_FENCED)


def _keys(event: NewEvent) -> list[str]:
    """The keys whose presence refuses this (fenced) event: its run's end — unless it is that
    end —, the note of its run's next incarnation and, for a child's input, that of its caller's."""
    keys = [resumed_key(event.run_id, incarnation(event) + 1)]
    if event.idempotency_key != end_key(event.run_id):
        keys.append(end_key(event.run_id))
    if caller := _caller(event):
        keys.append(resumed_key(caller, incarnation(event, CALLER_RESUME) + 1))
    return keys


def fence_keys(events: Sequence[NewEvent], *, stored: Collection[str] = ()) -> list[str]:
    """The keys whose presence in the session refuses this batch. Events whose keys are in
    `stored` are retries of stored events, not new ones."""
    return sorted({key for event in events if _fenced(event, stored) for key in _keys(event)})


def refusal(
    events: Sequence[NewEvent], found: Mapping[str, Event], *, stored: Collection[str] = ()
) -> FailedPrecondition | None:
    """The refusal of this batch given the fence keys the store `found` (the stored events, by
    key): for its first fenced event, that its run ended — which says most — or was taken over;
    None when none is fenced."""
    for index, event in enumerate(events):
        if _fenced(event, stored) and (refused := _refusal(index, event, found)) is not None:
            return refused
    return None


def conflict_refusal(index: int, event: NewEvent, found: Mapping[str, Event]) -> FailedPrecondition | None:
    """The fence's refusal of `events[index]`, whose key already names *another* event, when the
    fence keys `found` refuse it: a lost incarnation's end, say, whose key the taker's end holds —
    told that its run was taken over, which is why, rather than that its key is reused (which it
    would take for "the first end stands"). None when the fence does not refuse it."""
    return _refusal(index, event, found) if _fenced(event, stored=()) else None


def _refusal(index: int, event: NewEvent, found: Mapping[str, Event]) -> FailedPrecondition | None:
    keys = _keys(event)
    end = found.get(end_key(event.run_id)) if end_key(event.run_id) in keys else None
    if end is not None:
        return RunEnded(index, event.run_id, end.id)
    note = found.get(keys[0])
    if note is not None:
        return RunTakenOver(index, event.run_id, incarnation(event), note.id)
    caller = _caller(event)
    note = found.get(keys[-1]) if caller else None
    if note is not None:
        return RunTakenOver(index, caller, incarnation(event, CALLER_RESUME), note.id, started=event.run_id)
    return None
