"""How a delegated run ended — on an executor of the pool or at a remote A2A agent — as the
caller's loop needs it, and the `DelegationOutcome` it is recorded as."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.providers.base import Usage
from agentmesh.runtime import metrics

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
    # It did not end: a remote A2A task stopped in input-required with this question, which the
    # caller asks its own caller (loops/asking.py); the answer continues the same task.
    question: str = ""

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


def outcome_name(outcome: Outcome.ValueType) -> str:
    return Outcome.Name(outcome).removeprefix("DELEGATION_OUTCOME_").lower()


@dataclass
class DelegationResult:
    """What a delegation gives back to the delegating agent's loop."""

    outcome: Outcome.ValueType
    text: str
    usage: Usage = field(default_factory=Usage)
    # The delegated run suspended to wait for a person: the delegation stays open (no response
    # recorded), and the delegating run suspends waiting on it.
    suspended: SuspendedBelow | None = None
    # The remote A2A task asks this question: the delegation stays open, and the delegating run
    # asks its caller (loops/asking.py); the answer continues the task (`answer_remote`).
    question: str = ""

    @property
    def open(self) -> bool:
        """The delegation has not ended: it waits for a person (below, or through this run)."""
        return self.suspended is not None or bool(self.question)

    @property
    def is_error(self) -> bool:
        # A remote's question is an answer the model acts on, not an error.
        return self.outcome not in (
            Outcome.DELEGATION_OUTCOME_COMPLETED,
            Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED,
        )


def metric_outcome(outcome: Outcome.ValueType) -> metrics.DelegationOutcome:
    return {
        Outcome.DELEGATION_OUTCOME_COMPLETED: "ok",
        Outcome.DELEGATION_OUTCOME_REFUSED: "refused",
        Outcome.DELEGATION_OUTCOME_TIMEOUT: "timeout",
        Outcome.DELEGATION_OUTCOME_CANCELLED: "cancelled",
        Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED: "input_required",
        Outcome.DELEGATION_OUTCOME_AUTH_REQUIRED: "input_required",
    }.get(outcome, "failed")


def delegation_result(target: str, child: ChildOutcome) -> DelegationResult:
    if child.question:
        return DelegationResult(
            Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED, child.question, child.usage, question=child.question
        )
    if child.suspended is not None:
        waited = f"{target} waits for a person's input"
        return DelegationResult(
            Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED, waited, child.usage, child.suspended
        )
    outcome = child.delegation_outcome
    if outcome == Outcome.DELEGATION_OUTCOME_COMPLETED:
        return DelegationResult(outcome, child.content, child.usage)
    messages = {
        Outcome.DELEGATION_OUTCOME_REFUSED: f"{target} refused the task: {child.message}",
        Outcome.DELEGATION_OUTCOME_TIMEOUT: f"{target} did not answer in time: {child.message}",
        Outcome.DELEGATION_OUTCOME_CANCELLED: f"the delegation to {target} was cancelled",
        Outcome.DELEGATION_OUTCOME_INPUT_REQUIRED: f"{target} asks for more input: {child.message}",
        Outcome.DELEGATION_OUTCOME_AUTH_REQUIRED: f"{target} asks for authorization: {child.message}",
    }
    return DelegationResult(outcome, messages.get(outcome, f"{target} failed: {child.message}"), child.usage)
