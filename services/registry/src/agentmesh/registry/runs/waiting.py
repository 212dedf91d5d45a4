"""A suspended run's requests for a person's input (DESIGN §12) as pure functions of their
records: what an expired request's response is, how a request reads at a given moment, and which
responses fit which request. The stores apply them where they change a request (at a claim), the
rules (`input_requests.py`) where they read or answer one; neither states a rule of its own.

A request is pending until its one response: a person's (answered) or, past `expires_at`, the
system's denial (expired). A pending request past its expiry reads as expired at once, before
any claim has stored that (see `as_seen`): what a person is shown never depends on whether an
executor has come by yet.
"""

from __future__ import annotations

from datetime import datetime

from agentmesh.registry.errors import InputAlreadyAnswered, InputRequestExpired, RunCancelled
from agentmesh.registry.runs.input_models import (
    InputDecision,
    InputKind,
    InputRequest,
    InputRequestState,
    InputResponse,
)
from agentmesh.runtime.errors import FieldViolation

# Who responds when nobody did in time.
SYSTEM_RESPONDER = "system"
# How long a request waits when its run set no expiry (AgentType.input_expiry_seconds 0: a day).
DEFAULT_EXPIRY_SECONDS = 86_400
MAX_REASON_CHARS = 2000
MAX_ANSWER_BYTES = 32 * 1024


def expiry_response(request: InputRequest) -> InputResponse:
    """The response an unanswered request gets when it expires: a denial by the system, dated at
    its expiry (so it reads the same whenever it is stored)."""
    waited = int((request.expires_at - request.created_at).total_seconds())
    return InputResponse(
        decision=InputDecision.DENY,
        reason=f"expired: nobody responded within {_duration(waited)}",
        responder=SYSTEM_RESPONDER,
        responded_at=request.expires_at,
    )


def is_due(request: InputRequest, now: datetime) -> bool:
    """Whether a pending request has expired by `now`."""
    return request.state is InputRequestState.PENDING and request.expires_at <= now


def expired(request: InputRequest) -> InputRequest:
    return request.model_copy(
        update={"state": InputRequestState.EXPIRED, "response": expiry_response(request)}
    )


def as_seen(request: InputRequest, now: datetime) -> InputRequest:
    """The request as it stands at `now`: expired once past its expiry, stored so or not."""
    return expired(request) if is_due(request, now) else request


def answered(request: InputRequest, response: InputResponse) -> InputRequest:
    return request.model_copy(update={"state": InputRequestState.ANSWERED, "response": response})


def response_violations(request: InputRequest, response: InputResponse) -> list[FieldViolation]:
    """What is wrong with `response` for this request: an approval takes a decision (with an
    optional reason, and edited arguments only to approve), a question a non-empty answer and no
    decision — or `deny` alone, to decline it (with an optional reason) — a client tool call its
    result as the answer (which may be empty, as a tool's output may) and no decision."""
    violations = []
    if len(response.reason) > MAX_REASON_CHARS:
        violations.append(FieldViolation("response.reason", f"must be at most {MAX_REASON_CHARS} characters"))
    if request.kind is InputKind.APPROVAL:
        if response.decision is None:
            violations.append(FieldViolation("response.decision", "an approval needs approve or deny"))
        if response.answer:
            violations.append(
                FieldViolation("response.answer", "an approval takes a decision, not an answer")
            )
        if response.arguments is not None and response.decision is not InputDecision.APPROVE:
            violations.append(FieldViolation("response.arguments", "edited arguments go only with approve"))
        return violations
    what = "a client tool call" if request.kind is InputKind.CLIENT_TOOL else "a question"
    if request.kind is InputKind.QUESTION and response.decision is InputDecision.DENY:
        return violations + _decline_violations(response)
    if response.decision is not None:
        violations.append(
            FieldViolation(
                "response.decision",
                f"{what} takes an answer, not a decision"
                + (" (deny declines it)" if request.kind is InputKind.QUESTION else ""),
            )
        )
    if response.arguments is not None:
        violations.append(FieldViolation("response.arguments", f"{what} takes an answer, not arguments"))
    if request.kind is InputKind.QUESTION and not response.answer.strip():
        violations.append(FieldViolation("response.answer", "a question needs a non-empty answer"))
    elif len(response.answer.encode()) > MAX_ANSWER_BYTES:
        violations.append(FieldViolation("response.answer", f"must be at most {MAX_ANSWER_BYTES} bytes"))
    return violations


def _decline_violations(response: InputResponse) -> list[FieldViolation]:
    """A declined question carries why at most, not an answer as well."""
    if response.answer:
        return [FieldViolation("response.answer", "a declined question takes no answer (deny, or answer)")]
    if response.arguments is not None:
        return [FieldViolation("response.arguments", "a question takes an answer, not arguments")]
    return []


def _duration(seconds: int) -> str:
    """`86400` → "1 day", `7200` → "2 hours", `90` → "90 seconds": the largest whole unit."""
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


def refusal(request: InputRequest) -> Exception:
    """Why a response to this request (not pending any more) is refused."""
    if request.state is InputRequestState.CANCELLED:
        assert request.response is not None
        return RunCancelled(
            f"request {request.id!r} was closed: its run was cancelled by {request.response.responder}"
        )
    if request.state is InputRequestState.EXPIRED:
        return InputRequestExpired(
            f"request {request.id!r} expired at {request.expires_at.isoformat()}: nobody responded "
            "in time, and it counts as a denial"
        )
    response = request.response
    assert response is not None and response.responded_at is not None
    return InputAlreadyAnswered(request.id, response.responder, response.responded_at.isoformat())
