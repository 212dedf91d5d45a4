"""What the memory rules need from storage: the `EventStore` interface, which the SQL store
(`store.py`) and the in-memory one (`in_memory_store.py`) implement, and the types they share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from agentmesh.memory.models import Event, EventQuery, NewEvent, RetentionPolicy, Session

# The sort key a page of events resumes after: (seq,) within a session; (created_at, session_id,
# seq) for an agent across sessions. Sessions resume after (updated_at, id).
EventCursor = tuple[Any, ...]
SessionCursor = tuple[datetime, str]
# Says whether an append may go ahead, given the session's project ("" when the append creates it)
# and its last seq before the append, by raising the error that refuses it. Called inside the
# append's transaction (raising rolls the whole append back), or after a one-statement append
# whose conflict WHERE refused it, to raise the error that says why.
AdmitAppend = Callable[[str, int], None]


class IdempotencyKeyRace(Exception):
    """A concurrent append stored one of the batch's idempotency keys first; nothing was written."""


class FenceRefused(Exception):
    """The append holds an event that one of its stored fence keys refuses (fence.py: its run's
    end, or the note of the run's takeover); nothing was written."""

    def __init__(self, found: dict[str, Event]) -> None:
        super().__init__(f"fence keys stored: {sorted(found)}")
        self.found = found  # the stored events of the fence keys, by idempotency key


class EventStore(Protocol):
    """What the memory rules need from storage."""

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
        """Stores the batch after the session's last event and returns it with the new last seq.

        `admit` decides; `expected_last_seq` (the one `admit` checks) lets the store check it in
        the database, before writing, instead of in a transaction around the write. `fence`:
        idempotency keys (run ends and takeover notes, fence.py) whose presence in the session
        refuses the append with FenceRefused — checked atomically with the write, under the lock
        that assigns seq."""
        ...

    async def events_by_idempotency_key(
        self, session_id: str, project_id: str, keys: Sequence[str]
    ) -> dict[str, Event]: ...

    async def get_session(self, session_id: str, project_id: str) -> Session | None: ...

    async def sessions_with_id(self, session_id: str, *, limit: int) -> list[Session]:
        """Sessions of any project with this id (at most `limit`): how a caller that does not
        name the project finds its session, when the id is unambiguous."""
        ...

    async def list_events(
        self, query: EventQuery, *, after: EventCursor | None, limit: int
    ) -> list[Event]: ...

    async def count_events(self, query: EventQuery) -> int: ...

    async def list_sessions(
        self, project_id: str, *, after: SessionCursor | None, limit: int
    ) -> list[Session]: ...

    async def count_sessions(self, project_id: str) -> int: ...

    async def stored_bytes(self, project_id: str) -> int:
        """What the project's kept events weigh, as counted against its `stored_bytes` limit:
        each event's content and metadata JSON (validation.event_bytes), added when it is stored
        and subtracted when retention removes it."""
        ...

    async def session_boundary(self, project_id: str, *, skip: int) -> SessionCursor | None:
        """The cursor of the `skip`-th session in list order (the last one when there are fewer),
        None when the project has none: where page N starts, found without OFFSET."""
        ...

    async def get_retention_policy(self, project_id: str) -> RetentionPolicy | None: ...

    async def set_retention_policy(self, policy: RetentionPolicy, *, now: datetime) -> RetentionPolicy: ...

    async def bounded_retention_policies(self) -> list[RetentionPolicy]: ...

    async def sessions_to_trim(
        self,
        project_id: str,
        *,
        more_events_than: int | None,
        created_before: datetime | None,
        after_id: str,
        limit: int,
    ) -> list[Session]: ...

    async def expired_prefix_end(
        self, session_id: str, project_id: str, *, from_seq: int, cutoff: datetime, limit: int
    ) -> int: ...

    async def trim_session(self, session_id: str, project_id: str, *, first_seq: int) -> int: ...

    async def create_session(self, session: Session) -> bool:
        """Stores a new session as given (a fork, forks.py); False, storing nothing, when its
        project already has a session with its id."""
        ...

    async def reset_context(self, session_id: str, project_id: str) -> Session | None:
        """Moves the session's context start to its last seq; the session, None when unknown."""
        ...

    async def delete_project(self, project_id: str, *, now: datetime) -> int:
        """Records the project as deleted (no append creates a session in it again) and erases
        its sessions, their events and its retention policy. Returns how many sessions went."""
        ...

    async def erase_deleted_projects(self) -> int:
        """Erases what appends racing a project's deletion left behind; how many sessions went."""
        ...
