"""Fencing of a run's steps after its end (issue 15, docs/durability.md).

A run's final event carries the idempotency key `<run_id>:end` (the executor's `recorder.end_key`),
whoever records it: the run, its cancellation, or the executor that took it over. An executor cut
off from the registry past its lease may still be running a run that was closed meanwhile; its
steps would land after the run's final event. So an append is refused (`RUN_ENDED`) when one of
its new events belongs to a run whose `<run_id>:end` is stored — except:

- the end itself (the same key: a retry, or a second end, which the key already settles);
- a `delegation_response`: every `delegation_request` recorded before the end must keep exactly
  one response, and a response has its own key (`<delegation_id>:response`);
- an event that is already stored (a retry of an append that landed before the end): answered
  as stored, like any retry — the caller looks the keys up first (`EventLog.append`).

The check is made by the store, atomically with the write (`EventStore.append`'s `fence`): under
the session's lock that assigns `seq`, so an end and a step of its run appended in the same
instant are ordered — the step lands before the end, or is refused. This module says which ends
an append is fenced by, and turns the ends the store found into the refusal.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from agentmesh.memory.errors import RunEnded
from agentmesh.memory.models import Event, EventType, NewEvent

_NOT_FENCED = (EventType.DELEGATION_RESPONSE,)


def end_key(run_id: str) -> str:
    """The idempotency key of a run's one final event (as the executor's `recorder.end_key`)."""
    return f"{run_id}:end"


def _is_step(event: NewEvent, stored: Collection[str]) -> bool:
    return bool(
        event.run_id
        and event.idempotency_key not in stored
        and event.event_type not in _NOT_FENCED
        and event.idempotency_key != end_key(event.run_id)
    )


def fence_keys(events: Sequence[NewEvent], *, stored: Collection[str] = ()) -> list[str]:
    """The end keys whose presence in the session refuses this batch: those of the runs its steps
    belong to. Events whose keys are in `stored` are retries of stored events, not new steps."""
    return sorted({end_key(event.run_id) for event in events if _is_step(event, stored)})


def refusal(
    events: Sequence[NewEvent], ends: Mapping[str, Event], *, stored: Collection[str] = ()
) -> RunEnded | None:
    """The refusal of this batch given the stored `ends` (by key) the store found: the first step
    of an ended run, or None."""
    for index, event in enumerate(events):
        if _is_step(event, stored):
            end = ends.get(end_key(event.run_id))
            if end is not None:
                return RunEnded(index, event.run_id, end.id)
    return None
