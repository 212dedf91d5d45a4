"""The gateway's own errors: each a DomainError with its gRPC code and UPPER_SNAKE reason.

Errors of the services behind the gateway pass through unchanged (same code, reason and field
violations); these are the ones the gateway raises itself, at the edge. Where the gateway
reports what a service behind it means (a session that is not there is the memory service's
`SessionNotFound`), it raises that service's error, from its client module; the shared ones
(`SuperuserRequired`, `SystemRequired`) are the runtime's.
"""

from __future__ import annotations

import math

from agentmesh.runtime.errors import (
    RETRY_AFTER_SECONDS,
    Cancelled,
    FailedPrecondition,
    FieldViolation,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    TokenRevoked,
    Unauthenticated,
    Unavailable,
    ValidationFailed,
)

__all__ = [
    "RETRY_AFTER_SECONDS",
    "ApiKeyOutOfScope",
    "ClientDisconnected",
    "ExecutorsBusy",
    "InvalidApiKey",
    "InvalidParameterValue",
    "InvalidRequest",
    "MessageTooLarge",
    "ModelNotFound",
    "NoExecutor",
    "NoPolicy",
    "PreviousResponseNotFound",
    "RateLimited",
    "RequestTooLarge",
    "ResponseNotCancellable",
    "ResponseNotDeletable",
    "ResponseNotFound",
    "TaskNotFound",
    "TokenRevoked",
    "TooManyMessages",
    "UnsupportedParameter",
]


class ClientDisconnected(Cancelled):
    """The HTTP client went away before the answer: the work below it is cancelled."""

    default_reason = "CLIENT_DISCONNECTED"

    def __init__(self) -> None:
        super().__init__("the client disconnected")


class InvalidRequest(ValidationFailed):
    """A request field the gateway checks itself is missing or malformed: reported as every
    service reports bad input (`ValidationFailed`)."""


class UnsupportedParameter(InvalidRequest):
    """An OpenAI request field, or a value of it, that the mesh cannot honour (`n` above 1,
    `logprobs`, an image part): refused as OpenAI refuses what a model does not support (400,
    naming the field), never silently dropped."""

    default_reason = "UNSUPPORTED_PARAMETER"

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}", violations=[FieldViolation(field, description)])


class InvalidParameterValue(InvalidRequest):
    """An OpenAI request field whose value OpenAI itself refuses (a `tool_choice` of "banana"):
    400, naming the field, as OpenAI answers."""

    default_reason = "INVALID_VALUE"

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}", violations=[FieldViolation(field, description)])


class PreviousResponseNotFound(InvalidRequest):
    """A Responses API request's `previous_response_id` names no response of the project: 400,
    as OpenAI answers, so a conversation never goes on in a new, empty session by mistake."""

    default_reason = "PREVIOUS_RESPONSE_NOT_FOUND"

    def __init__(self, response_id: str) -> None:
        super().__init__(
            f"previous response {response_id!r} not found",
            violations=[FieldViolation("previous_response_id", "no such response in this project")],
        )


class RateLimited(ResourceExhausted):
    """The caller sent more requests than its rate allows; ErrorInfo metadata
    `retry_after_seconds` (and HTTP `Retry-After`) say when to try again."""

    default_reason = "RATE_LIMITED"

    def __init__(self, retry_after_seconds: float) -> None:
        seconds = max(1, math.ceil(retry_after_seconds))
        super().__init__(
            f"rate limit exceeded; retry in {seconds} s", metadata={RETRY_AFTER_SECONDS: str(seconds)}
        )
        self.retry_after_seconds = seconds


class ExecutorsBusy(ResourceExhausted):
    """Every executor that could take the run is at its concurrency cap."""

    default_reason = "EXECUTORS_BUSY"

    def __init__(self, retry_after_seconds: int = 1) -> None:
        super().__init__(
            "every executor is at its concurrency cap; retry later",
            metadata={RETRY_AFTER_SECONDS: str(retry_after_seconds)},
        )


class NoExecutor(Unavailable):
    default_reason = "NO_EXECUTOR"


class RequestTooLarge(ResourceExhausted):
    default_reason = "REQUEST_TOO_LARGE"

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body is larger than {limit} bytes", metadata={"max_bytes": str(limit)})


class MessageTooLarge(ResourceExhausted):
    default_reason = "MESSAGE_TOO_LARGE"

    def __init__(self, field: str, limit: int) -> None:
        super().__init__(
            f"{field} is larger than {limit} bytes",
            violations=[FieldViolation(field, f"at most {limit} bytes")],
            metadata={"max_bytes": str(limit)},
        )


class TooManyMessages(ResourceExhausted):
    default_reason = "TOO_MANY_MESSAGES"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"messages holds {count} messages, more than the limit of {limit}",
            violations=[FieldViolation("messages", f"at most {limit} messages")],
        )


class ModelNotFound(NotFound):
    """An OpenAI-style model name that names no agent the caller may use."""

    default_reason = "MODEL_NOT_FOUND"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"the model {model!r} does not exist or you do not have access to it; "
            "models are named 'project_slug/agent_name'",
            violations=[FieldViolation("model", "no such agent")],
        )


class ResponseNotFound(NotFound):
    """A response id (`GET /v1/responses/{response_id}`) that names no response the caller may
    read: made up, mistyped, or another project's, which looks exactly like one that never was."""

    default_reason = "RESPONSE_NOT_FOUND"

    def __init__(self, response_id: str) -> None:
        super().__init__(f"Response with id {response_id!r} not found.")


class ResponseNotDeletable(FailedPrecondition):
    """A response that cannot be deleted (`DELETE /v1/responses/{response_id}`): in progress,
    waiting for input, or sharing its session's log with other turns. A 400, in OpenAI's shape."""

    default_reason = "RESPONSE_NOT_DELETABLE"

    def __init__(self, response_id: str, why: str) -> None:
        super().__init__(f"Response with id {response_id!r} cannot be deleted: {why}.")


class ResponseNotCancellable(FailedPrecondition):
    """A response that is not in progress (`POST /v1/responses/{response_id}/cancel`): answered,
    failed, or waiting for the client's tool results. A 400, as OpenAI answers it."""

    default_reason = "RESPONSE_NOT_CANCELLABLE"

    def __init__(self, response_id: str, why: str) -> None:
        super().__init__(f"Response with id {response_id!r} cannot be cancelled: {why}.")


class TaskNotFound(NotFound):
    """No A2A task of this id for this agent (or one the caller may not see)."""

    default_reason = "TASK_NOT_FOUND"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} not found")


class NoPolicy(PermissionDenied):
    """An operation without an entry in the policy table: refused, never served by default."""

    default_reason = "NO_POLICY"


class InvalidApiKey(Unauthenticated):
    """An API key the gateway refuses before asking the registry (it has not a key's shape). The
    message never repeats the key."""

    default_reason = "API_KEY_INVALID"


class ApiKeyOutOfScope(PermissionDenied):
    """A project-scoped API key used for something outside its project."""

    default_reason = "API_KEY_OUT_OF_SCOPE"


class NoPublicAgent(NotFound):
    """No agent published at this address. An agent that does not exist and one its owner keeps
    private answer alike, so a stranger learns nothing of what a project holds."""

    default_reason = "AGENT_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("no public agent at this address")
