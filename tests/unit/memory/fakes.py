"""An in-memory EventStore for unit tests of the memory rules."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from agentmesh.memory.models import Event, EventQuery, NewEvent, RetentionPolicy, Session
from agentmesh.memory.store import AdmitAppend, EventCursor, IdempotencyKeyRace, SessionCursor


class InMemoryEventStore:
    """EventStore held in dicts; `trims` records every trim_session call."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.events: dict[str, list[Event]] = {}
        self.policies: dict[str, RetentionPolicy] = {}
        self.trims: list[tuple[str, int]] = []
        self.race_once_on: set[str] = set()

    async def append(
        self,
        session_id: str,
        project_id: str,
        batch: Sequence[NewEvent],
        *,
        now: datetime,
        admit: AdmitAppend,
        expected_last_seq: int | None = None,
    ) -> tuple[list[Event], int]:
        # admit checks expected_last_seq; this store has no database to check it first.
        session = self.sessions.get(session_id) or Session(
            id=session_id,
            project_id=project_id,
            agent=batch[0].agent,
            created_at=now,
            updated_at=now,
            last_seq=0,
            first_seq=1,
        )
        admit(session.project_id, session.last_seq)
        for event in batch:
            if event.idempotency_key in self.race_once_on:
                # Another writer stores this key first.
                self.race_once_on.discard(event.idempotency_key)
                await self.append(session_id, project_id, [event], now=now, admit=lambda *_: None)
                raise IdempotencyKeyRace(session_id)
        session = self.sessions.get(session_id, session)
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
        self.sessions[session_id] = session.model_copy(update={"last_seq": last_seq, "updated_at": now})
        self.events.setdefault(session_id, []).extend(stored)
        return stored, last_seq

    async def events_by_idempotency_key(self, session_id: str, keys: Sequence[str]) -> dict[str, Event]:
        return {e.idempotency_key: e for e in self.events.get(session_id, []) if e.idempotency_key in keys}

    async def get_session(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    def _matching(self, query: EventQuery) -> list[Event]:
        if query.session_id:
            found = list(self.events.get(query.session_id, []))
        else:
            found = [
                e
                for s in self.sessions.values()
                if s.project_id == query.project_id
                for e in self.events[s.id]
            ]
            found.sort(key=lambda e: (e.created_at, e.session_id, e.seq))
        return [
            e
            for e in found
            if (not query.agent or e.agent == query.agent)
            and (not query.event_types or e.event_type in query.event_types)
            and (not query.run_id or e.run_id == query.run_id)
            and e.seq > query.after_seq
        ]

    async def list_events(self, query: EventQuery, *, after: EventCursor | None, limit: int) -> list[Event]:
        found = self._matching(query)

        def key(e: Event) -> tuple:
            return (e.seq,) if query.session_id else (e.created_at, e.session_id, e.seq)

        if query.descending:
            found.reverse()
        if after is not None:
            found = [e for e in found if (key(e) < after if query.descending else key(e) > after)]
        return found[:limit]

    async def count_events(self, query: EventQuery) -> int:
        return len(self._matching(query))

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]:
        found = sorted(
            (s for s in self.sessions.values() if s.project_id == project_id),
            key=lambda s: (s.updated_at, s.id),
            reverse=True,
        )
        if after is not None:
            found = [s for s in found if (s.updated_at, s.id) < after]
        return found[:limit]

    async def count_sessions(self, project_id: str) -> int:
        return sum(1 for s in self.sessions.values() if s.project_id == project_id)

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy | None:
        return self.policies.get(project_id)

    async def set_retention_policy(self, policy: RetentionPolicy, *, now: datetime) -> RetentionPolicy:
        self.policies[policy.project_id] = policy
        return policy

    async def bounded_retention_policies(self) -> list[RetentionPolicy]:
        return [p for p in self.policies.values() if not p.is_unbounded]

    async def sessions_to_trim(
        self,
        project_id: str,
        *,
        more_events_than: int | None,
        created_before: datetime | None,
        after_id: str,
        limit: int,
    ) -> list[Session]:
        return sorted(
            (
                s
                for s in self.sessions.values()
                if s.project_id == project_id
                and s.id > after_id
                and s.first_seq <= s.last_seq
                and (
                    (more_events_than is not None and s.last_seq - s.first_seq + 1 > more_events_than)
                    or (created_before is not None and s.created_at < created_before)
                )
            ),
            key=lambda s: s.id,
        )[:limit]

    async def expired_prefix_end(
        self, session_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int:
        end = from_seq
        for event in [e for e in self.events[session_id] if e.seq >= from_seq][:limit]:
            if event.created_at >= cutoff:
                break
            end = event.seq + 1
        return end

    async def trim_session(self, session_id: str, *, first_seq: int) -> int:
        self.trims.append((session_id, first_seq))
        session = self.sessions[session_id]
        if session.first_seq >= first_seq:
            return 0
        self.sessions[session_id] = session.model_copy(update={"first_seq": first_seq})
        kept = [e for e in self.events[session_id] if e.seq >= first_seq]
        removed = len(self.events[session_id]) - len(kept)
        self.events[session_id] = kept
        return removed
