"""The memory service's errors: each a DomainError with its gRPC code and UPPER_SNAKE reason.

The shared server interceptor turns them into rich statuses; `MemoryClient` callers get them back
as the runtime's typed errors (`NotFound`, `Aborted`, `OutOfRange`, …) with the same `reason` and
metadata. `ValidationFailed` is the runtime's, shared by every service.
"""

from __future__ import annotations

from agentmesh.runtime.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    Unavailable,
    ValidationFailed,
)

__all__ = [
    "AfterSeqAhead",
    "AtSeqBeyondEnd",
    "EventTooLarge",
    "ExpectedLastSeqMismatch",
    "FieldViolation",
    "HistoryTrimmed",
    "IdempotencyKeyContention",
    "IdempotencyKeyReused",
    "ProjectDeleted",
    "ProjectNotFound",
    "RunEnded",
    "RunNotInSession",
    "RunTakenOver",
    "SessionExists",
    "SessionNotFound",
    "SessionShared",
    "ShuttingDown",
    "TooManyEvents",
    "ValidationFailed",
]


class SessionNotFound(NotFound):
    """Also what the gateway answers for a session of a project the caller may not see."""

    default_reason = "SESSION_NOT_FOUND"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found", metadata={"session_id": session_id})


class SessionExists(AlreadyExists):
    """A fork asked for a session id its project already uses."""

    default_reason = "SESSION_EXISTS"

    def __init__(self, session_id: str) -> None:
        message = f"session {session_id!r} already exists"
        super().__init__(
            message,
            violations=[FieldViolation("new_session_id", message)],
            metadata={"session_id": session_id},
        )


class AtSeqBeyondEnd(OutOfRange):
    """A fork asked for a seq the source session has not reached."""

    default_reason = "AT_SEQ_BEYOND_END"

    def __init__(self, session_id: str, at_seq: int, last_seq: int) -> None:
        super().__init__(
            f"session {session_id!r} is at seq {last_seq}; at_seq {at_seq} is beyond its end",
            violations=[FieldViolation("at_seq", f"must be at most {last_seq}")],
            metadata={"session_id": session_id, "last_seq": str(last_seq)},
        )


class ProjectDeleted(NotFound):
    """An append for a project the registry deleted: its sessions are erased, none is created."""

    default_reason = "PROJECT_DELETED"

    def __init__(self, project_id: str) -> None:
        super().__init__(f"project {project_id!r} was deleted", metadata={"project_id": project_id})


class ProjectNotFound(NotFound):
    """A project the caller may not act in: one it does not own looks exactly like an unknown one."""

    default_reason = "PROJECT_NOT_FOUND"

    def __init__(self, project_id: str) -> None:
        super().__init__("project not found", metadata={"project_id": project_id})


class ShuttingDown(Unavailable):
    """The service is stopping: a watch ends with where to resume from, on another replica."""

    default_reason = "SHUTTING_DOWN"


class IdempotencyKeyContention(Aborted):
    """Concurrent appends kept racing on the same idempotency keys; retrying settles it."""

    default_reason = "IDEMPOTENCY_KEY_CONTENTION"


class ExpectedLastSeqMismatch(Aborted):
    """Optimistic concurrency: another writer appended first; nothing was written."""

    default_reason = "EXPECTED_LAST_SEQ_MISMATCH"

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"session {session_id!r} is at seq {actual}, not the expected {expected}; nothing was written",
            metadata={"session_id": session_id, "expected_last_seq": str(expected), "last_seq": str(actual)},
        )
        self.actual = actual


class IdempotencyKeyReused(AlreadyExists):
    """An idempotency key already names an event with other content."""

    default_reason = "IDEMPOTENCY_KEY_REUSED"

    def __init__(self, index: int, key: str, event_id: str) -> None:
        field = f"events[{index}].idempotency_key"
        message = f"idempotency key {key!r} already names event {event_id} with other content"
        super().__init__(
            message,
            violations=[FieldViolation(field, message)],
            metadata={"idempotency_key": key, "event_id": event_id},
        )


class EventTooLarge(ResourceExhausted):
    default_reason = "EVENT_TOO_LARGE"

    def __init__(self, index: int, size: int, limit: int) -> None:
        field = f"events[{index}].content"
        message = f"event {index} is {size} bytes, more than the limit of {limit}; nothing was written"
        super().__init__(
            message,
            violations=[FieldViolation(field, message)],
            metadata={"size_bytes": str(size), "max_event_bytes": str(limit)},
        )


class TooManyEvents(ResourceExhausted):
    default_reason = "TOO_MANY_EVENTS"

    def __init__(self, count: int, limit: int) -> None:
        message = f"{count} events in one batch, more than the limit of {limit}; nothing was written"
        super().__init__(
            message,
            violations=[FieldViolation("events", message)],
            metadata={"max_batch_events": str(limit)},
        )


class HistoryTrimmed(OutOfRange):
    """The reader asked for events that retention has removed."""

    default_reason = "HISTORY_TRIMMED"

    def __init__(self, session_id: str, after_seq: int, first_seq: int, *, field: str = "after_seq") -> None:
        super().__init__(
            f"events after seq {after_seq} of session {session_id!r} were removed by retention; "
            f"the oldest kept is seq {first_seq}",
            violations=[FieldViolation(field, f"resume at seq {first_seq - 1} or later")],
            metadata={"session_id": session_id, "first_seq": str(first_seq)},
        )
        self.first_seq = first_seq


class AfterSeqAhead(OutOfRange):
    """The reader asked to resume after a seq the session has not reached."""

    default_reason = "AFTER_SEQ_AHEAD"

    def __init__(self, session_id: str, after_seq: int, last_seq: int) -> None:
        super().__init__(
            f"session {session_id!r} is at seq {last_seq}; after_seq {after_seq} is ahead of it",
            violations=[FieldViolation("after_seq", f"must be at most {last_seq}")],
            metadata={"session_id": session_id, "last_seq": str(last_seq)},
        )


class RunEnded(FailedPrecondition):
    """A step of a run whose final event is recorded: the run is over (fencing, fence.py)."""

    default_reason = "RUN_ENDED"

    def __init__(self, index: int, run_id: str, end_event_id: str) -> None:
        message = (
            f"run {run_id!r} has ended (its final event is {end_event_id}): events[{index}] of it is "
            "refused; nothing was written"
        )
        super().__init__(
            message,
            violations=[FieldViolation(f"events[{index}].run_id", message)],
            metadata={"run_id": run_id, "end_event_id": end_event_id},
        )


class RunTakenOver(FailedPrecondition):
    """An event of a run recorded by the executor that lost it: another executor took the run
    over and resumes it (its `RUN_RESUMED` note is stored; fencing, fence.py)."""

    default_reason = "RUN_TAKEN_OVER"

    def __init__(
        self, index: int, run_id: str, resume: int, note_event_id: str, *, started: str = ""
    ) -> None:
        what = f"the input of run {started!r} it started before that" if started else "of the run before that"
        message = (
            f"run {run_id!r} was taken over by another executor (resume {resume + 1}, noted in event "
            f"{note_event_id}): events[{index}], {what}, is refused; nothing was written"
        )
        super().__init__(
            message,
            violations=[FieldViolation(f"events[{index}].run_id", message)],
            metadata={"run_id": run_id, "resume": str(resume + 1), "resumed_event_id": note_event_id},
        )


class RunNotInSession(NotFound):
    """A run to erase that has no turn (user message) in the session."""

    default_reason = "RUN_NOT_IN_SESSION"

    def __init__(self, session_id: str, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} has no turn in session {session_id!r}",
            metadata={"session_id": session_id, "run_id": run_id},
        )


class SessionShared(FailedPrecondition):
    """A run to erase whose session holds another run's turn too, or another session's history
    (a fork): erasing the session's log would erase that as well."""

    default_reason = "SESSION_SHARED"

    def __init__(self, session_id: str, run_id: str) -> None:
        super().__init__(
            f"session {session_id!r} holds more than run {run_id!r}'s turn: its log cannot be "
            "erased for that run alone",
            metadata={"session_id": session_id, "run_id": run_id},
        )
