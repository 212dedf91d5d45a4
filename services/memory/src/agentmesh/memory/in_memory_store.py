"""The event store held in memory: for unit tests of the memory rules, and the plainest statement
of the store's contract (the same suite runs over it and over `store.SqlEventStore`).

Every method runs without awaiting anything, so each is atomic on the event loop, as each SQL
method is a transaction: an append either stores its whole batch, gap-free after the session's
last seq, or (refused by `admit`, or by an idempotency key already stored) stores nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from agentmesh.memory.errors import ProjectDeleted
from agentmesh.memory.event_store import (
    AdmitAppend,
    EventCursor,
    FenceRefused,
    IdempotencyKeyRace,
    SessionCursor,
)
from agentmesh.memory.fence import end_key
from agentmesh.memory.models import Event, EventQuery, NewEvent, RetentionPolicy, RunState, Session
from agentmesh.memory.validation import event_bytes

# A session's key: its project and its id.
Key = tuple[str, str]


class InMemoryEventStore:
    """EventStore in dicts: sessions, each session's events in seq order, retention policies,
    deleted projects."""

    def __init__(self) -> None:
        self._sessions: dict[Key, Session] = {}
        self._events: dict[Key, list[Event]] = {}
        self._policies: dict[str, RetentionPolicy] = {}
        self._deleted: set[str] = set()

    # --- appending ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
        expected_last_seq: int | None = None,
        fence: Sequence[str] = (),
    ) -> tuple[list[Event], int]:
        # `admit` checks expected_last_seq here; the SQL store may check it in the database first.
        if project_id in self._deleted:
            raise ProjectDeleted(project_id)
        key = (project_id, session_id)
        session = self._sessions.get(key)
        if session is None:
            admit(project_id, 0)
            session = Session(
                id=session_id,
                project_id=project_id,
                agent=batch[0].agent,
                created_at=now,
                updated_at=now,
                last_seq=0,
                first_seq=1,
            )
        else:
            admit(session.project_id, session.last_seq)
        found = {e.idempotency_key: e for e in self._events.get(key, []) if e.idempotency_key in fence}
        if found:
            raise FenceRefused(found)
        stored_keys = {event.idempotency_key for event in self._events.get(key, [])}
        keys = [event.idempotency_key for event in batch if event.idempotency_key]
        if stored_keys.intersection(keys) or len(set(keys)) < len(keys):
            raise IdempotencyKeyRace(session_id)
        stored = [
            Event(
                **event.model_dump(),
                id=str(uuid.uuid4()),
                session_id=session_id,
                seq=session.last_seq + 1 + index,
                created_at=now,
            )
            for index, event in enumerate(batch)
        ]
        last_seq = session.last_seq + len(batch)
        self._sessions[key] = session.model_copy(update={"last_seq": last_seq, "updated_at": now})
        self._events.setdefault(key, []).extend(stored)
        return stored, last_seq

    async def events_by_idempotency_key(
        self, session_id: str, project_id: str, keys: Sequence[str]
    ) -> dict[str, Event]:
        wanted = set(keys)
        events = self._events.get((project_id, session_id), [])
        return {e.idempotency_key: e for e in events if e.idempotency_key in wanted}

    # --- reading -----------------------------------------------------------------------------

    async def get_session(self, session_id: str, project_id: str) -> Session | None:
        return self._sessions.get((project_id, session_id))

    async def sessions_with_id(self, session_id: str, *, limit: int) -> list[Session]:
        found = sorted((s for s in self._sessions.values() if s.id == session_id), key=lambda s: s.project_id)
        return found[:limit]

    async def list_events(self, query: EventQuery, *, after: EventCursor | None, limit: int) -> list[Event]:
        found = self._matching(query)

        def key(event: Event) -> tuple[object, ...]:
            return (event.seq,) if query.session_id else (event.created_at, event.session_id, event.seq)

        if query.descending:
            found.reverse()
        if after is not None:
            found = [e for e in found if (key(e) < after if query.descending else key(e) > after)]
        return found[:limit]

    async def count_events(self, query: EventQuery) -> int:
        return len(self._matching(query))

    def _matching(self, query: EventQuery) -> list[Event]:
        """The query's events in its ascending order: seq within a session; (created_at,
        session_id, seq) across a project's sessions."""
        if query.session_id:
            found = self._inherited(query)
            found += [
                e
                for e in self._events.get((query.project_id, query.session_id), [])
                if not query.lineage or e.seq > query.lineage[0][1]
            ]
        else:
            found = [
                event
                for key, session in self._sessions.items()
                if session.project_id == query.project_id
                for event in self._events.get(key, [])
            ]
            found.sort(key=lambda e: (e.created_at, e.session_id, e.seq))
        matching = [
            e
            for e in found
            if (not query.agent or e.agent == query.agent)
            and (not query.event_types or e.event_type in query.event_types)
            and (not query.run_id or e.run_id == query.run_id)
            and e.seq > query.after_seq
        ]
        if query.filters_runs:
            matching = [e for e in matching if self._run_matches(e, query)]
        return matching

    def _inherited(self, query: EventQuery) -> list[Event]:
        """A fork's inherited events in seq order: each lineage session's, up to its bound and
        above the next one's."""
        found: list[Event] = []
        bounds = [bound for _, bound in query.lineage[1:]] + [0] if query.lineage else []
        for (source, bound), below in reversed(list(zip(query.lineage, bounds, strict=True))):
            found += [e for e in self._events.get((query.project_id, source), []) if below < e.seq <= bound]
        return found

    def _run_matches(self, event: Event, query: EventQuery) -> bool:
        if not event.run_id:
            return False
        session = self._events.get((query.project_id, event.session_id), [])
        run = [e for e in session if e.run_id == event.run_id]
        if query.run_states:
            end = next((e for e in session if e.idempotency_key == end_key(event.run_id)), None)
            if RunState.of(end) not in query.run_states:
                return False
        since = query.run_active_since
        return since is None or any(e.created_at >= since for e in run)

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]:
        found = sorted(
            (s for s in self._sessions.values() if s.project_id == project_id),
            key=lambda s: (s.updated_at, s.id),
            reverse=True,
        )
        if after is not None:
            found = [s for s in found if (s.updated_at, s.id) < after]
        return found[:limit]

    async def stored_bytes(self, project_id: str) -> int:
        # The events themselves are kept here: their sizes are summed, not counted along.
        kept = [events for key, events in self._events.items() if key[0] == project_id]
        return sum(event_bytes(event) for events in kept for event in events)

    async def count_sessions(self, project_id: str) -> int:
        return sum(1 for s in self._sessions.values() if s.project_id == project_id)

    async def session_boundary(self, project_id: str, *, skip: int) -> SessionCursor | None:
        head = await self.list_sessions(project_id, after=None, limit=skip)
        return (head[-1].updated_at, head[-1].id) if head else None

    # --- retention ---------------------------------------------------------------------------

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy | None:
        return self._policies.get(project_id)

    async def set_retention_policy(self, policy: RetentionPolicy, *, now: datetime) -> RetentionPolicy:
        self._policies[policy.project_id] = policy
        return policy

    async def bounded_retention_policies(self) -> list[RetentionPolicy]:
        bounded = [p for p in self._policies.values() if not p.is_unbounded]
        return sorted(bounded, key=lambda policy: policy.project_id)

    async def sessions_to_trim(
        self,
        project_id: str,
        *,
        more_events_than: int | None,
        created_before: datetime | None,
        after_id: str,
        limit: int,
    ) -> list[Session]:
        def due(session: Session) -> bool:
            too_long = (
                more_events_than is not None and session.last_seq - session.first_seq + 1 > more_events_than
            )
            too_old = created_before is not None and session.created_at < created_before
            return too_long or too_old

        candidates = [
            s
            for s in self._sessions.values()
            if s.project_id == project_id and s.id > after_id and s.first_seq <= s.last_seq and due(s)
        ]
        return sorted(candidates, key=lambda s: s.id)[:limit]

    async def expired_prefix_end(
        self, session_id: str, project_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int:
        end = from_seq
        events = self._events.get((project_id, session_id), [])
        for event in [e for e in events if e.seq >= from_seq][:limit]:
            if event.created_at >= cutoff:
                break
            end = event.seq + 1
        return end

    async def create_session(self, session: Session) -> bool:
        key = (session.project_id, session.id)
        if key in self._sessions or session.project_id in self._deleted:
            return False
        self._sessions[key] = session
        return True

    async def reset_context(self, session_id: str, project_id: str) -> Session | None:
        key = (project_id, session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        self._sessions[key] = session.model_copy(update={"context_start_seq": session.last_seq})
        return self._sessions[key]

    async def trim_session(self, session_id: str, project_id: str, *, first_seq: int) -> int:
        key = (project_id, session_id)
        session = self._sessions.get(key)
        # As in SQL: only forward, and never past the seq the next append takes.
        if session is None or session.first_seq >= first_seq or session.last_seq + 1 < first_seq:
            return 0
        self._sessions[key] = session.model_copy(update={"first_seq": first_seq})
        events = self._events.get(key, [])
        kept = [e for e in events if e.seq >= first_seq]
        self._events[key] = kept
        return len(events) - len(kept)

    # --- deletion ----------------------------------------------------------------------------

    async def delete_project(self, project_id: str, *, now: datetime) -> int:
        self._deleted.add(project_id)
        self._policies.pop(project_id, None)
        return await self.erase_deleted_projects()

    async def erase_deleted_projects(self) -> int:
        gone = [key for key in self._sessions if key[0] in self._deleted]
        for key in gone:
            del self._sessions[key]
            self._events.pop(key, None)
        return len(gone)
