"""The registry's errors: each a DomainError with its gRPC code and UPPER_SNAKE reason.

The shared server interceptor turns them into rich statuses; `RegistryClient` callers get them back
as the runtime's typed errors (`NotFound`, `FailedPrecondition`, …) with the same `reason`.
`ValidationFailed`, `SuperuserRequired` and `SystemRequired` are the runtime's, shared by every
service, and listed here so the registry's catalogue is complete in one place.
"""

from __future__ import annotations

from agentmesh.runtime.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    ResourceExhausted,
    SuperuserRequired,
    SystemRequired,
    Unauthenticated,
    ValidationFailed,
)

__all__ = [
    "AgentNameTaken",
    "AgentNotFound",
    "AgentPaused",
    "AgentTerminated",
    "AgentTypeInUse",
    "AgentTypeInactive",
    "AgentTypeNotFound",
    "AgentVersionNotFound",
    "ApiKeyInvalid",
    "ApiKeyNotFound",
    "CannotChangeSelf",
    "EmailTaken",
    "FieldViolation",
    "InputAlreadyAnswered",
    "InputRequestExpired",
    "InputRequestNotFound",
    "InvalidCredentials",
    "InvalidTransition",
    "InvitationInvalid",
    "InvitationNotFound",
    "LimitRaiseDenied",
    "LoginThrottled",
    "McpServerNameTaken",
    "McpServerNotFound",
    "ProjectNotFound",
    "QuotaExceeded",
    "RefreshTokenInvalid",
    "RefreshTokenReused",
    "RegistrationClosed",
    "RemoteAgentNameTaken",
    "RemoteAgentNotFound",
    "RunCancelled",
    "RunNotFound",
    "RunNotHeld",
    "SessionAgentAmbiguous",
    "SessionBusy",
    "SlugTaken",
    "SuperuserRequired",
    "SystemRequired",
    "UserInactive",
    "UserNotFound",
    "UserRequired",
    "ValidationFailed",
    "WebhookNotFound",
]


class EmailTaken(AlreadyExists):
    default_reason = "EMAIL_TAKEN"


class InvalidCredentials(Unauthenticated):
    default_reason = "INVALID_CREDENTIALS"


class UserNotFound(NotFound):
    default_reason = "USER_NOT_FOUND"


class UserInactive(Unauthenticated):
    default_reason = "USER_INACTIVE"


class LoginThrottled(ResourceExhausted):
    """Too many failed sign-ins for one account; ErrorInfo metadata `retry_after_seconds` says
    when to try again."""

    default_reason = "LOGIN_THROTTLED"

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(
            f"too many failed sign-ins; retry in {retry_after_seconds} s",
            metadata={"retry_after_seconds": str(retry_after_seconds)},
        )
        self.retry_after_seconds = retry_after_seconds


class RegistrationClosed(PermissionDenied):
    """Registration is closed: only a superuser creates users."""

    default_reason = "REGISTRATION_CLOSED"


class InvitationInvalid(PermissionDenied):
    """Registration is invite-only and no usable invitation came with it: missing, unknown,
    used, revoked and expired invitations all get this one answer."""

    default_reason = "INVITATION_INVALID"


class InvitationNotFound(NotFound):
    default_reason = "INVITATION_NOT_FOUND"


class RefreshTokenInvalid(Unauthenticated):
    """Unknown, expired or revoked refresh token."""

    default_reason = "REFRESH_TOKEN_INVALID"


class RefreshTokenReused(Unauthenticated):
    """A refresh token that was already exchanged: its whole sign-in is revoked."""

    default_reason = "REFRESH_TOKEN_REUSED"


class AgentTypeNotFound(NotFound):
    default_reason = "AGENT_TYPE_NOT_FOUND"


class SlugTaken(AlreadyExists):
    default_reason = "SLUG_TAKEN"


class AgentTypeInUse(FailedPrecondition):
    default_reason = "AGENT_TYPE_IN_USE"


class AgentTypeInactive(FailedPrecondition):
    default_reason = "AGENT_TYPE_INACTIVE"


class ProjectNotFound(NotFound):
    """Also what callers get for a project they may not see: they never learn it exists."""

    default_reason = "PROJECT_NOT_FOUND"


class LimitRaiseDenied(PermissionDenied):
    """A project's owner tried to raise one of its limits, which only a superuser may do; the
    message and ErrorInfo metadata `field` name the limit."""

    default_reason = "LIMIT_RAISE_DENIED"

    def __init__(self, field: str, before: int, after: int) -> None:
        super().__init__(
            f"only a superuser may raise {field} (from {_shown(before)} to {_shown(after)}); "
            "an owner may only lower it",
            metadata={"field": field},
        )


def _shown(limit: int) -> str:
    return str(limit) if limit else "unlimited"


class AgentNotFound(NotFound):
    default_reason = "AGENT_NOT_FOUND"


class AgentVersionNotFound(NotFound):
    default_reason = "AGENT_VERSION_NOT_FOUND"


class SessionAgentAmbiguous(FailedPrecondition):
    """A version number for a session's agent, without naming the agent, where the session has
    run several agents or none."""

    default_reason = "SESSION_AGENT_AMBIGUOUS"


class AgentNameTaken(AlreadyExists):
    default_reason = "AGENT_NAME_TAKEN"


class InvalidTransition(FailedPrecondition):
    default_reason = "INVALID_TRANSITION"


class AgentPaused(FailedPrecondition):
    default_reason = "AGENT_PAUSED"


class AgentTerminated(FailedPrecondition):
    default_reason = "AGENT_TERMINATED"


class McpServerNotFound(NotFound):
    default_reason = "MCP_SERVER_NOT_FOUND"


class McpServerNameTaken(AlreadyExists):
    """A registered MCP server of that name exists in the same scope (the project, or global)."""

    default_reason = "MCP_SERVER_NAME_TAKEN"


class ApiKeyInvalid(Unauthenticated):
    """A malformed, unknown, revoked or expired API key, or one whose user is deactivated. The
    message never repeats the key."""

    default_reason = "API_KEY_INVALID"


class ApiKeyNotFound(NotFound):
    default_reason = "API_KEY_NOT_FOUND"


class CannotChangeSelf(FailedPrecondition):
    """A superuser may not deactivate or demote itself: the mesh could be left with none."""

    default_reason = "CANNOT_CHANGE_SELF"


class RemoteAgentNotFound(NotFound):
    default_reason = "REMOTE_AGENT_NOT_FOUND"


class RemoteAgentNameTaken(AlreadyExists):
    """An agent or a remote agent of the project has that name already."""

    default_reason = "REMOTE_AGENT_NAME_TAKEN"


class SessionBusy(Aborted):
    """A message for a session whose previous run is still in flight, under the double-texting
    policy `reject`; ErrorInfo metadata `run_id` names the run in flight."""

    default_reason = "SESSION_BUSY"

    def __init__(self, session_id: str, run_id: str) -> None:
        super().__init__(
            f"session {session_id!r} is busy: run {run_id} is still in flight "
            "(double-texting policy reject; retry when it ended, or send with enqueue or interrupt)",
            metadata={"run_id": run_id, "session_id": session_id},
        )


class SessionAwaitsInput(FailedPrecondition):
    """A message for a session whose earlier turn is a run suspended for a person's input: the
    session goes on once that is answered (its requests, in ErrorInfo metadata `request_ids`)."""

    default_reason = "INPUT_REQUIRED"

    def __init__(self, session_id: str, run_id: str, request_ids: list[str]) -> None:
        super().__init__(
            f"session {session_id!r} waits for a person's input to run {run_id}: respond to "
            f"request(s) {', '.join(request_ids)} first",
            metadata={"run_id": run_id, "session_id": session_id, "request_ids": ",".join(request_ids)},
        )


class RunNotFound(NotFound):
    """A run that is not in flight (never started, or ended)."""

    default_reason = "RUN_NOT_FOUND"


class RunNotHeld(FailedPrecondition):
    """An executor acting on a run it does not hold (its lease went to another, or it is parked)."""

    default_reason = "RUN_NOT_HELD"


class InputRequestNotFound(NotFound):
    default_reason = "INPUT_REQUEST_NOT_FOUND"


class RunCancelled(FailedPrecondition):
    """The run a request for input belongs to was cancelled while it waited: nobody may respond."""

    default_reason = "RUN_CANCELLED"


class InputAlreadyAnswered(FailedPrecondition):
    """A request for input has its one response already; ErrorInfo metadata `responder` and
    `responded_at` say whose and when."""

    default_reason = "INPUT_ALREADY_ANSWERED"

    def __init__(self, request_id: str, responder: str, responded_at: str) -> None:
        super().__init__(
            f"request {request_id!r} was already answered by {responder} at {responded_at}",
            metadata={"responder": responder, "responded_at": responded_at},
        )


class InputRequestExpired(FailedPrecondition):
    """A request for input nobody answered before it expired: it counts as a denial."""

    default_reason = "INPUT_REQUEST_EXPIRED"


class DuplicateRequest(Exception):
    """A create carried a request id that another create already used (a concurrent retry).

    Not one of the errors callers see: a store raises it to the rules, which answer the retry with
    what the first create made. It lives here, below the stores, so every store part can raise it."""


class UserRequired(PermissionDenied):
    """What only a user may do (own a project), asked with the system principal's token."""

    default_reason = "USER_REQUIRED"


class WebhookNotFound(NotFound):
    default_reason = "WEBHOOK_NOT_FOUND"


class ScheduleNotFound(NotFound):
    default_reason = "SCHEDULE_NOT_FOUND"


class ScheduleNameTaken(AlreadyExists):
    """A schedule of the project has that name already."""

    default_reason = "SCHEDULE_NAME_TAKEN"


class ScheduleDisabled(FailedPrecondition):
    """A disabled schedule cannot be made due."""

    default_reason = "SCHEDULE_DISABLED"


class ScheduleFiringNotFound(NotFound):
    default_reason = "SCHEDULE_FIRING_NOT_FOUND"
