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

One indexed look-up of the batch's runs' end keys per append that holds run steps. The check and
the write are not one transaction: a step appended in the same instant as its run's end may still
land after it (the executor's own end and steps are sequential; only a cut-off executor races a
taker).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from agentmesh.memory.errors import RunEnded
from agentmesh.memory.event_store import EventStore
from agentmesh.memory.models import EventType, NewEvent

_NOT_FENCED = (EventType.DELEGATION_RESPONSE,)


def end_key(run_id: str) -> str:
    """The idempotency key of a run's one final event (as the executor's `recorder.end_key`)."""
    return f"{run_id}:end"


async def fenced(
    store: EventStore,
    session_id: str,
    project_id: str,
    events: Sequence[NewEvent],
    *,
    stored: Collection[str] = (),
) -> RunEnded | None:
    """Why this batch may not be appended (a step of an ended run), or None. Events whose keys
    are in `stored` are retries of stored events, not new steps."""
    steps = {
        index: event
        for index, event in enumerate(events)
        if event.run_id
        and event.idempotency_key not in stored
        and event.event_type not in _NOT_FENCED
        and event.idempotency_key != end_key(event.run_id)
    }
    if not steps:
        return None
    ends = await store.events_by_idempotency_key(
        session_id, project_id, sorted({end_key(event.run_id) for event in steps.values()})
    )
    for index, event in steps.items():
        end = ends.get(end_key(event.run_id))
        if end is not None:
            return RunEnded(index, event.run_id, end.id)
    return None
