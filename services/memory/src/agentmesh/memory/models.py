"""The memory service's domain types: sessions, their events, retention policies and queries.

Plain pydantic values, free of protobuf and SQL: `convert.py` maps them to and from protos, the
store to and from rows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field


class EventType(StrEnum):
    """What an event records; the value is the JSON name (DESIGN §4)."""

    USER_MESSAGE = "user_message"
    AGENT_RESPONSE = "agent_response"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    DELEGATION_REQUEST = "delegation_request"
    DELEGATION_RESPONSE = "delegation_response"
    TASK_DELEGATION_RECEIVED = "task_delegation_received"
    ESCALATION = "escalation"
    ERROR = "error"
    INPUT_REQUESTED = "input_requested"  # a run asks a person, and suspends
    INPUT_RECEIVED = "input_received"  # the one response, as the resumed run recorded it
    CONTEXT_COMPACTED = "context_compacted"  # a summary of older history that prompts reuse


class RunState(StrEnum):
    """Where a run stands, by its one final event (idempotency key `<run_id>:end`, fence.py)."""

    RUNNING = "running"  # no final event yet
    ANSWERED = "answered"  # its agent_response
    FAILED = "failed"  # an error whose `code` is not CANCELLED
    CANCELLED = "cancelled"  # an error whose `code` is CANCELLED

    @classmethod
    def of(cls, end: NewEvent | None) -> RunState:
        """The state a run's final event (None: none recorded yet) puts it in."""
        if end is None:
            return cls.RUNNING
        if end.event_type == EventType.AGENT_RESPONSE:
            return cls.ANSWERED
        return cls.CANCELLED if end.metadata.get("code") == CANCELLED_CODE else cls.FAILED


# The `code` a cancelled run's final error records (the executor's, as gRPC names the status).
CANCELLED_CODE = "CANCELLED"


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> Self:
        """The value of `values`, which name every field and are already of its type (protobuf or
        the database typed them), taken as they are: what `model_construct` makes, without its
        loop over the fields for aliases and defaults — the cost of building one event, which an
        append of many events pays for each. `values` becomes the value's own."""
        value = cls.__new__(cls)
        object.__setattr__(value, "__dict__", values)
        object.__setattr__(value, "__pydantic_fields_set__", set(values))
        object.__setattr__(value, "__pydantic_extra__", None)
        object.__setattr__(value, "__pydantic_private__", None)
        return value


class NewEvent(_Value):
    """An event to append: everything but what the memory service assigns (id, seq, created_at)."""

    agent: str
    event_type: EventType
    content: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    run_id: str = ""
    parent_event_id: str = ""
    delegation_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    idempotency_key: str = ""

    def same_payload(self, other: NewEvent | Event) -> bool:
        """Whether `other` records the same thing, so a repeated idempotency key is a retry.

        The trace and span ids are left out: they describe the attempt that recorded the event,
        and a retry may come from another span.
        """
        return (
            self.agent == other.agent
            and self.event_type == other.event_type
            and self.content == other.content
            and self.metadata == other.metadata
            and self.run_id == other.run_id
            and self.parent_event_id == other.parent_event_id
            and self.delegation_id == other.delegation_id
        )


class Event(NewEvent):
    """One immutable record in a session."""

    id: str
    session_id: str
    seq: int
    created_at: datetime


class Session(_Value):
    """One conversation. Its events are numbered 1..last_seq; those below first_seq were removed
    by retention."""

    id: str
    project_id: str
    agent: str
    created_at: datetime
    updated_at: datetime
    last_seq: int
    first_seq: int
    # Its agents' history starts after this seq (ResetSessionContext); 0 = from the start.
    context_start_seq: int = 0
    # A fork's source session and the seq it was forked at ("" and 0 for a session of its own):
    # its events up to that seq are read from its lineage, never copied.
    forked_from_session_id: str = ""
    forked_at_seq: int = 0
    # Where a fork's inherited events are: the sessions it reads through, nearest first, each with
    # the highest seq read from it (strictly decreasing). Session `i` holds the seqs above the
    # next one's bound; the fork itself holds those above the first bound.
    lineage: tuple[tuple[str, int], ...] = ()


class RetentionPolicy(_Value):
    """How much history a project keeps; 0 means no bound."""

    project_id: str
    max_age_seconds: int = 0
    max_events_per_session: int = 0

    @property
    def is_unbounded(self) -> bool:
        return self.max_age_seconds == 0 and self.max_events_per_session == 0


class AppendResult(_Value):
    """What an append stored (or, for repeated idempotency keys, had stored before)."""

    events: list[Event]
    last_seq: int


class EventQuery(_Value):
    """Which events to list: one session's, or one agent's across a project's sessions."""

    session_id: str = ""
    project_id: str = ""
    agent: str = ""
    event_types: tuple[EventType, ...] = ()
    run_id: str = ""
    after_seq: int = 0
    descending: bool = False
    # Only events after the session's context start (what an agent's history reads).
    from_context_start: bool = False
    # Only events of a run in one of these states (an event with no run is in none).
    run_states: tuple[RunState, ...] = ()
    # Only events of a run whose latest event was recorded at or after this time.
    run_active_since: datetime | None = None
    # A fork's lineage (Session.lineage): its events up to these bounds are read from these
    # sessions. Set by the rules from the session, never by a caller.
    lineage: tuple[tuple[str, int], ...] = ()

    @property
    def filters_runs(self) -> bool:
        return bool(self.run_states) or self.run_active_since is not None


class EventPage(_Value):
    """One page of events, with the token for the next one ("" on the last)."""

    events: list[Event]
    next_page_token: str = ""
    total_size: int = 0
    # The page ended before page_size because its events reached the byte bound.
    byte_limit_reached: bool = False


class SessionPage(_Value):
    """One page of a project's sessions, most recently active first."""

    sessions: list[Session]
    next_page_token: str = ""
    total_size: int = 0
