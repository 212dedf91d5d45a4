"""How a delegated run ended — on an executor of the pool or at a remote A2A agent — as the
caller's loop needs it, and the `DelegationOutcome` it is recorded as."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.providers.base import Usage

Outcome = run_pb2.DelegationOutcome
_REFUSED_CODES = {
    "FAILED_PRECONDITION",
    "NOT_FOUND",
    "PERMISSION_DENIED",
    "INVALID_ARGUMENT",
    "UNAUTHENTICATED",
}
# A remote A2A task that stopped waiting for its caller (a2a_events.py) says so in its outcome.
_STOPPED_CODES = {
    "INPUT_REQUIRED": Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED,
    "AUTH_REQUIRED": Outcome.DELEGATION_OUTCOME_AUTH_REQUIRED,
}


@dataclass(frozen=True)
class SuspendedBelow:
    """A run below this one (delegated, or a workflow's sub-agent) that suspended to wait for a
    person: this run waits on it (parked), for `request_ids` — its own, or those it waits on in
    turn — and goes on once it has ended."""

    run_id: str
    request_ids: tuple[str, ...]


@dataclass
class ChildOutcome:
    """How a run on another executor ended, as its caller needs it."""

    completed: bool = False
    content: str = ""
    usage: Usage = field(default_factory=Usage)
    escalated: bool = False
    code: str = ""  # gRPC status code name when it did not complete
    message: str = ""
    in_doubt: bool = False  # its outcome is unknown (a remote delegation's send, on resume)
    # It did not end: it suspended to wait for a person (itself or a run below it) — its run's
    # id and the requests it waits for. Its caller waits on it, parked too (loops/asking.py).
    suspended: SuspendedBelow | None = None

    @property
    def delegation_outcome(self) -> Outcome.ValueType:
        if self.completed:
            return Outcome.DELEGATION_OUTCOME_COMPLETED
        if self.code in _STOPPED_CODES:
            return _STOPPED_CODES[self.code]
        if self.code in _REFUSED_CODES:
            return Outcome.DELEGATION_OUTCOME_REFUSED
        if self.code == "DEADLINE_EXCEEDED":
            return Outcome.DELEGATION_OUTCOME_TIMEOUT
        if self.code == "CANCELLED":
            return Outcome.DELEGATION_OUTCOME_CANCELLED
        return Outcome.DELEGATION_OUTCOME_FAILED
