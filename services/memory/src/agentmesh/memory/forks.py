"""Session forks: a new session that reads its source's history up to a seq, then goes its own way.

A fork copies no event. Its session row records its source and the seq it was forked at, and its
lineage: the sessions its inherited events are read from, nearest first, each with the highest seq
read from it. Reads of the fork (`rows.event_conditions`, `InMemoryEventStore`) take each seq range
from the session that holds it, so a fork of a fork reads through both; the seq ranges are
disjoint, so a read keeps seq order, its page cursors and its windows. The fork's own events
start at the seq after the fork point, as if the inherited ones were its own; the source never
changes, and appending to it later changes nothing a fork sees.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from agentmesh.memory.errors import (
    AtSeqBeyondEnd,
    FieldViolation,
    HistoryTrimmed,
    SessionExists,
    SessionNotFound,
    ValidationFailed,
)
from agentmesh.memory.event_store import EventStore
from agentmesh.memory.models import Event, Session
from agentmesh.memory.validation import check_id

Lineage = tuple[tuple[str, int], ...]
# Sessions whose lineage a log keeps, so that reading a session needs no look-up of it.
_LINEAGES_KEPT = 10_000


class Lineages:
    """Sessions' lineages, kept after the first read: a session's lineage never changes once it
    exists (its id is never reused: a deleted project takes no session again)."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._kept: dict[tuple[str, str], Lineage] = {}

    async def of(self, session_id: str, project_id: str) -> Lineage:
        """The session's lineage; () for an unknown session (which the read then reports)."""
        lineage = self._kept.get((project_id, session_id))
        if lineage is None:
            session = await self._store.get_session(session_id, project_id)
            if session is None:
                return ()
            self.remember(session)
            lineage = session.lineage
        return lineage

    def remember(self, session: Session) -> None:
        if len(self._kept) >= _LINEAGES_KEPT:
            self._kept.clear()
        self._kept[(session.project_id, session.id)] = session.lineage


def fork_lineage(source: Session, at_seq: int) -> Lineage:
    """The lineage of a fork of `source` at `at_seq`: the source's own range and its lineage's,
    cut at `at_seq`, without the sessions that hold nothing at or below it."""
    segments = [(source.id, at_seq), *source.lineage]
    lineage: list[tuple[str, int]] = []
    for index, (session_id, bound) in enumerate(segments):
        below = segments[index + 1][1] if index + 1 < len(segments) else 0
        top = min(bound, at_seq)
        if top > below:
            lineage.append((session_id, top))
    return tuple(lineage)


def as_read_by(events: Sequence[Event], session_id: str) -> list[Event]:
    """The events as the session reading them shows them: a fork's inherited events are its own."""
    return [
        e if e.session_id == session_id else e.model_copy(update={"session_id": session_id}) for e in events
    ]


async def fork_session(
    store: EventStore, session_id: str, project_id: str, *, at_seq: int, new_session_id: str, now: datetime
) -> Session:
    """Creates the fork of the project's session at `at_seq` (see the module's docstring)."""
    violations: list[FieldViolation] = []
    check_id(session_id, "session_id", violations, required=True)
    check_id(project_id, "project_id", violations, required=True)
    check_id(new_session_id, "new_session_id", violations, required=False)
    if at_seq < 1:
        violations.append(FieldViolation("at_seq", "must be at least 1"))
    if violations:
        raise ValidationFailed.of(violations)
    source = await store.get_session(session_id, project_id)
    if source is None:
        raise SessionNotFound(session_id)
    if at_seq > source.last_seq:
        raise AtSeqBeyondEnd(session_id, at_seq, source.last_seq)
    if at_seq < source.first_seq - 1:
        raise HistoryTrimmed(session_id, at_seq, source.first_seq, field="at_seq")
    fork = Session(
        id=new_session_id or str(uuid.uuid4()),
        project_id=project_id,
        agent=source.agent,
        created_at=now,
        updated_at=now,
        last_seq=at_seq,
        first_seq=source.first_seq,
        context_start_seq=min(source.context_start_seq, at_seq),
        forked_from_session_id=session_id,
        forked_at_seq=at_seq,
        lineage=fork_lineage(source, at_seq),
    )
    if not await store.create_session(fork):
        raise SessionExists(fork.id)
    return fork
