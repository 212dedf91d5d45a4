"""The memory rules: what an append may store, how sessions are read, followed and trimmed.

`EventLog` validates requests, makes appends idempotent and optimistic-concurrency safe (through
`appending.Appends`), pages reads with tokens bound to their filters, follows sessions live and
reports history removed by retention instead of skipping it, and erases a deleted project's
sessions (closing their watches).
A session is its project's: (project_id, session_id) names it, so two projects may use one id. A
caller that does not name the project finds a session only while its id is unique; when several
projects use it, it is not found (which says nothing of the other projects' sessions).
It knows neither protobuf nor SQL; `retention.RetentionSweeper` does the background trimming.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from agentmesh.memory.appending import Appends
from agentmesh.memory.errors import (
    AfterSeqAhead,
    FieldViolation,
    HistoryTrimmed,
    RunNotInSession,
    SessionNotFound,
    SessionShared,
    ShuttingDown,
    ValidationFailed,
)
from agentmesh.memory.event_store import (
    EventCursor,
    EventStore,
    SessionCursor,
)
from agentmesh.memory.forks import Lineages, as_read_by, fork_session
from agentmesh.memory.models import (
    AppendResult,
    Event,
    EventPage,
    EventQuery,
    EventType,
    NewEvent,
    RetentionPolicy,
    Session,
    SessionPage,
)
from agentmesh.memory.storage_quota import StoredBytesQuota
from agentmesh.memory.validation import (
    check_id,
    checked_page_size,
    event_bytes,
)
from agentmesh.memory.watch import SessionSignals
from agentmesh.runtime.pagination import (
    PageTokenCodec,
    cursor_datetime,
    cursor_int,
    cursor_str,
)

logger = logging.getLogger(__name__)

DEFAULT_EVENT_PAGE = 100
DEFAULT_SESSION_PAGE = 50
# A page of events is read in chunks, the first this many events, so that a page of large events
# stops reading near its byte bound instead of reading page_size of them.
_FIRST_CHUNK_EVENTS = 64

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class EventLog:
    """Sessions as ordered, append-only, idempotent event logs."""

    def __init__(
        self,
        store: EventStore,
        signals: SessionSignals,
        *,
        page_tokens: PageTokenCodec,
        max_event_bytes: int,
        max_batch_events: int,
        max_page_bytes: int = 1024 * 1024,
        watch_poll_seconds: float = 0.5,
        watch_batch_events: int = 500,
        clock: Clock = utc_now,
        quota: StoredBytesQuota | None = None,
    ) -> None:
        self._store = store
        self._signals = signals
        self._page_tokens = page_tokens
        self._max_page_bytes = max_page_bytes
        self._watch_poll_seconds = watch_poll_seconds
        self._watch_batch_events = watch_batch_events
        self._clock = clock
        self._lineages = Lineages(store)
        self._appends = Appends(
            store,
            signals,
            find=self._find,
            max_event_bytes=max_event_bytes,
            max_batch_events=max_batch_events,
            clock=clock,
            quota=quota,
        )

    # --- appending ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        project_id: str,
        events: Sequence[NewEvent],
        *,
        expected_last_seq: int | None = None,
    ) -> AppendResult:
        """Stores the batch atomically after the session's last event, creating the session on
        first use; idempotent by key, refused for a run that has ended (appending.py)."""
        return await self._appends.append(session_id, project_id, events, expected_last_seq=expected_last_seq)

    # --- reading -----------------------------------------------------------------------------

    async def get_session(self, session_id: str, project_id: str = "") -> Session:
        violations: list[FieldViolation] = []
        check_id(session_id, "session_id", violations, required=True)
        check_id(project_id, "project_id", violations, required=False)
        if violations:
            raise ValidationFailed.of(violations)
        session = await self._find(session_id, project_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    async def _find(self, session_id: str, project_id: str) -> Session | None:
        """The project's session; without a project, the one session of any project with that
        id (none when several projects use it)."""
        if project_id:
            return await self._store.get_session(session_id, project_id)
        found = await self._store.sessions_with_id(session_id, limit=2)
        return found[0] if len(found) == 1 else None

    def check_listing(self, query: EventQuery, *, page_size: int = 0, page_token: str = "") -> None:
        """Refuses a listing as `list_events` would, before anything is read: an append that
        lists after itself (AppendEventsRequest.list_after_append) is refused before it writes."""
        self._validate_query(query)
        checked_page_size(page_size, DEFAULT_EVENT_PAGE)
        self._event_cursor(query, page_token, query.model_dump(mode="json"))

    async def list_events(
        self, query: EventQuery, *, page_size: int = 0, page_token: str = "", include_total_size: bool = False
    ) -> EventPage:
        """One page of a session's events in seq order (or newest first), or of one agent's
        events across a project's sessions in time order."""
        self._validate_query(query)
        limit = checked_page_size(page_size, DEFAULT_EVENT_PAGE)
        scope = query.model_dump(mode="json")
        after = self._event_cursor(query, page_token, scope)
        if query.session_id and not query.project_id:
            named = await self._find(query.session_id, "")
            if named is None:
                raise SessionNotFound(query.session_id)
            query = query.model_copy(update={"project_id": named.project_id})
        if query.from_context_start:
            query = await self._from_context_start(query)
        elif query.session_id:
            lineage = await self._lineages.of(query.session_id, query.project_id)
            query = query.model_copy(update={"lineage": lineage})
        found, more, byte_limit_reached = await self._read_page(query, after, limit)
        if query.lineage:
            found = as_read_by(found, query.session_id)
        session: Session | None = None
        if query.session_id:
            # Read after the events: retention only ever raises first_seq, so a first_seq that
            # still admits the cursor now admitted it while the events were read.
            session = await self._store.get_session(query.session_id, query.project_id)
            if session is None:
                raise SessionNotFound(query.session_id)
            position = after[0] if after is not None and not query.descending else query.after_seq
            if position and position < session.first_seq - 1:
                field = "page_token" if after is not None and not query.descending else "after_seq"
                raise HistoryTrimmed(session.id, position, session.first_seq, field=field)
        token = ""
        if more:
            last = found[-1]
            cursor = (
                [last.seq] if query.session_id else [last.created_at.isoformat(), last.session_id, last.seq]
            )
            token = self._page_tokens.encode(scope, cursor)
        total = 0
        if include_total_size:
            total = await self._count(query, session)
        return EventPage(
            events=found, next_page_token=token, total_size=total, byte_limit_reached=byte_limit_reached
        )

    async def _read_page(
        self, query: EventQuery, after: EventCursor | None, limit: int
    ) -> tuple[list[Event], bool, bool]:
        """Up to `limit` events after `after`, stopping early before their content and metadata
        pass the page's byte bound (the first event always comes: one event is bounded by
        max_event_bytes). Returns the events, whether more follow, and whether the byte bound
        ended the page. Read in chunks sized by what the events read so far weigh, so a page of
        large events reads about its bound, not `limit` of them."""
        found: list[Event] = []
        size = 0
        chunk = min(limit + 1, _FIRST_CHUNK_EVENTS)
        while True:
            batch = await self._store.list_events(query, after=after, limit=chunk)
            for event in batch:
                if len(found) == limit:
                    return found, True, False
                weight = event_bytes(event)
                if found and size + weight > self._max_page_bytes:
                    return found, True, True
                found.append(event)
                size += weight
            if len(batch) < chunk:
                return found, False, False
            last = found[-1]
            after = (last.seq,) if query.session_id else (last.created_at, last.session_id, last.seq)
            average = max(1, size // len(found))
            chunk = min(limit + 1 - len(found), max(1, 2 * (self._max_page_bytes - size) // average))

    async def _from_context_start(self, query: EventQuery) -> EventQuery:
        """The query starting after the session's context start (and never before what retention
        kept, which is no reason to fail a history read)."""
        session = await self._store.get_session(query.session_id, query.project_id)
        if session is None:
            raise SessionNotFound(query.session_id)
        start = max(query.after_seq, session.context_start_seq, session.first_seq - 1)
        update = {"after_seq": start, "from_context_start": False, "lineage": session.lineage}
        return query.model_copy(update=update)

    async def fork(
        self, session_id: str, project_id: str, *, at_seq: int, new_session_id: str = ""
    ) -> Session:
        """A new session of the project that reads this one's events up to `at_seq` as its own and
        goes its own way after them (forks.py); this one is untouched."""
        fork = await fork_session(
            self._store,
            session_id,
            project_id,
            at_seq=at_seq,
            new_session_id=new_session_id,
            now=self._clock(),
        )
        self._lineages.remember(fork)
        return fork

    async def reset_context(self, session_id: str, project_id: str) -> Session:
        """Starts the session's context afresh (its agents' history readers see only what comes
        next); its events stay."""
        violations: list[FieldViolation] = []
        check_id(session_id, "session_id", violations, required=True)
        check_id(project_id, "project_id", violations, required=True)
        if violations:
            raise ValidationFailed.of(violations)
        session = await self._store.reset_context(session_id, project_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    async def _count(self, query: EventQuery, session: Session | None) -> int:
        narrowed = query.agent or query.event_types or query.run_id or query.filters_runs
        if session is not None and not narrowed:
            # A session's kept events are exactly first_seq..last_seq.
            return max(0, session.last_seq - max(query.after_seq, session.first_seq - 1))
        return await self._store.count_events(query)

    @staticmethod
    def _validate_query(query: EventQuery) -> None:
        violations: list[FieldViolation] = []
        check_id(query.session_id, "session_id", violations, required=False)
        check_id(query.project_id, "project_id", violations, required=False)
        check_id(query.agent, "agent", violations, required=False)
        check_id(query.run_id, "run_id", violations, required=False)
        if query.after_seq < 0:
            violations.append(FieldViolation("after_seq", "must not be negative"))
        if not query.session_id:
            if not query.project_id:
                violations.append(FieldViolation("project_id", "is required when session_id is not set"))
            if not query.agent:
                violations.append(FieldViolation("agent", "is required when session_id is not set"))
            if query.after_seq:
                violations.append(FieldViolation("after_seq", "applies within a session: set session_id"))
            if query.from_context_start:
                violations.append(
                    FieldViolation("from_context_start", "applies within a session: set session_id")
                )
        if violations:
            raise ValidationFailed.of(violations)

    def _event_cursor(self, query: EventQuery, token: str, scope: dict[str, Any]) -> EventCursor | None:
        if query.session_id:
            cursor = self._page_tokens.decode(token, scope, cursor_len=1)
            return None if cursor is None else (cursor_int(cursor[0]),)
        cursor = self._page_tokens.decode(token, scope, cursor_len=3)
        if cursor is None:
            return None
        return cursor_datetime(cursor[0]), cursor_str(cursor[1]), cursor_int(cursor[2])

    async def list_sessions(
        self, project_id: str, *, page_size: int = 0, page_token: str = "", page: int = 0
    ) -> SessionPage:
        """A project's sessions, most recently active first: after `page_token`, or page number
        `page` (1-based), which the store reaches by its keyset boundary, never by OFFSET."""
        violations: list[FieldViolation] = []
        check_id(project_id, "project_id", violations, required=True)
        if page < 0:
            violations.append(FieldViolation("page", "must not be negative"))
        if page and page_token:
            violations.append(FieldViolation("page", "give either page or page_token, not both"))
        if violations:
            raise ValidationFailed.of(violations)
        limit = checked_page_size(page_size, DEFAULT_SESSION_PAGE)
        scope = {"project_id": project_id}
        cursor = self._page_tokens.decode(page_token, scope, cursor_len=2)
        after: SessionCursor | None = (
            None if cursor is None else (cursor_datetime(cursor[0]), cursor_str(cursor[1]))
        )
        if page > 1:
            after = await self._store.session_boundary(project_id, skip=(page - 1) * limit)
            if after is None:
                return SessionPage(sessions=[], total_size=0)
        found = await self._store.list_sessions(project_id, after=after, limit=limit + 1)
        token = ""
        if len(found) > limit:
            found = found[:limit]
            token = self._page_tokens.encode(scope, [found[-1].updated_at.isoformat(), found[-1].id])
        total = await self._store.count_sessions(project_id)
        return SessionPage(sessions=found, next_page_token=token, total_size=total)

    # --- following ---------------------------------------------------------------------------

    async def watch(self, session_id: str, after_seq: int = 0, project_id: str = "") -> AsyncIterator[Event]:
        """The session's events after `after_seq` (0: from the oldest kept), then each new one as
        it is committed: every event once, in seq order, until the caller stops listening or
        the session is erased with its project (NOT_FOUND then)."""
        if after_seq < 0:
            raise ValidationFailed.of([FieldViolation("after_seq", "must not be negative")])
        session = await self.get_session(session_id, project_id)
        project_id = session.project_id
        key = (project_id, session_id)
        if after_seq and after_seq < session.first_seq - 1:
            raise HistoryTrimmed(session_id, after_seq, session.first_seq)
        if after_seq > session.last_seq:
            raise AfterSeqAhead(session_id, after_seq, session.last_seq)
        sent = after_seq or session.first_seq - 1
        query = EventQuery(session_id=session_id, project_id=project_id, lineage=session.lineage)
        while True:
            # Take the signal before reading, so a commit between the read and the wait wakes us.
            signal = self._signals.signal(key)
            if self._signals.closing:
                raise ShuttingDown(
                    f"the memory service is stopping; resume with after_seq={sent}",
                    metadata={"session_id": session_id, "after_seq": str(sent)},
                )
            batch = await self._store.list_events(query, after=(sent,), limit=self._watch_batch_events)
            if batch and batch[0].seq != sent + 1:
                # seq is gap-free and retention removes only a prefix: a hole means the events
                # this watcher had not seen yet were removed.
                raise HistoryTrimmed(session_id, sent, batch[0].seq)
            for event in as_read_by(batch, session_id) if session.lineage else batch:
                yield event
                sent = event.seq
            if len(batch) == self._watch_batch_events:
                continue
            if not batch:
                current = await self._store.get_session(session_id, project_id)
                if current is None:
                    raise SessionNotFound(session_id)  # erased with its project
                if sent < current.first_seq - 1:
                    raise HistoryTrimmed(session_id, sent, current.first_seq)
            await self._signals.wait(signal, self._watch_poll_seconds)

    # --- deletion ----------------------------------------------------------------------------

    async def delete_project(self, project_id: str) -> int:
        """Erases the project's sessions and events now, refuses appends to it from now on, and
        ends its watch streams (here at once, on other replicas within their poll interval).
        Returns how many sessions were erased; deleting again erases nothing and succeeds."""
        violations: list[FieldViolation] = []
        check_id(project_id, "project_id", violations, required=True)
        if violations:
            raise ValidationFailed.of(violations)
        removed = await self._store.delete_project(project_id, now=self._clock())
        self._signals.notify_project(project_id)
        logger.info("project %s deleted: erased %d sessions", project_id, removed)
        return removed

    async def erase_run(self, session_id: str, project_id: str, run_id: str) -> int:
        """Erases the session's log up to now when it is the run's turn alone: the run's user
        message is the only one there (the runs it delegated to record none), and the session is
        no fork. The session stays, empty, its seq going on; what is appended after this read is
        kept. How many events went (a deleted OpenAI response's run: decision 0049)."""
        violations: list[FieldViolation] = []
        for name, value in (("session_id", session_id), ("project_id", project_id), ("run_id", run_id)):
            check_id(value, name, violations, required=True)
        if violations:
            raise ValidationFailed.of(violations)
        session = await self._store.get_session(session_id, project_id)
        if session is None:
            raise SessionNotFound(session_id)
        end = session.last_seq + 1  # later appends are not read here, and stay
        turns = EventQuery(
            session_id=session_id, project_id=project_id, event_types=(EventType.USER_MESSAGE,)
        )
        inputs = [
            event for event in await self._store.list_events(turns, after=None, limit=2) if event.seq < end
        ]
        if run_id not in {event.run_id for event in inputs}:
            raise RunNotInSession(session_id, run_id)
        if session.forked_from_session_id or len(inputs) > 1:
            raise SessionShared(session_id, run_id)
        erased = await self._store.trim_session(session_id, project_id, first_seq=end)
        logger.info("session %s: erased run %s's turn (%d events)", session_id, run_id, erased)
        return erased

    # --- retention ---------------------------------------------------------------------------

    async def set_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy:
        violations: list[FieldViolation] = []
        check_id(policy.project_id, "policy.project_id", violations, required=True)
        if policy.max_age_seconds < 0:
            violations.append(FieldViolation("policy.max_age_seconds", "must not be negative"))
        if policy.max_events_per_session < 0:
            violations.append(FieldViolation("policy.max_events_per_session", "must not be negative"))
        if violations:
            raise ValidationFailed.of(violations)
        return await self._store.set_retention_policy(policy, now=self._clock())

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy:
        violations: list[FieldViolation] = []
        check_id(project_id, "project_id", violations, required=True)
        if violations:
            raise ValidationFailed.of(violations)
        policy = await self._store.get_retention_policy(project_id)
        return policy or RetentionPolicy(project_id=project_id)
