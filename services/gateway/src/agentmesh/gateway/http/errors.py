"""HTTP errors: the one place where a DomainError becomes an HTTP status, rendered in the two
shapes the gateway speaks — `{"detail": ...}` on the REST API and OpenAI's
`{"error": {"message", "type", "param", "code"}}` on the OpenAI-compatible routes, so the official
clients raise their matching exceptions (AuthenticationError, NotFoundError, RateLimitError, …).

Invalid input reads the same on every face: gRPC carries `google.rpc.BadRequest` field violations;
a REST body mirrors them as `"field_violations": [{"field", "description"}]` beside `detail`
(for the gateway's own request checks as for any service's), and an OpenAI error names the first
in `param`, as OpenAI's own errors do.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from agentmesh.gateway.errors import (
    RETRY_AFTER_SECONDS,
    InvalidParameterValue,
    MessageTooLarge,
    PreviousResponseNotFound,
    RateLimited,
    RequestTooLarge,
    ResponseNotCancellable,
    ResponseNotDeletable,
    TooManyMessages,
    UnsupportedParameter,
)
from agentmesh.memory.client import EventTooLarge, HistoryTrimmed, TooManyEvents
from agentmesh.registry.client import (
    AgentTypeInactive,
    AgentTypeInUse,
    InputAlreadyAnswered,
    InputRequestExpired,
    RunCancelled,
)
from agentmesh.runtime import telemetry
from agentmesh.runtime.errors import DomainError, FieldViolation, QuotaExceeded

logger = logging.getLogger(__name__)

# Google's HTTP mapping of gRPC codes (AIP-193): an invalid state transition or a refusal to run
# (a paused or terminated agent) is FAILED_PRECONDITION → 400; 409 is for conflicts only
# (ALREADY_EXISTS, ABORTED, and the reasons below).
_STATUS_BY_CODE: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 422,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}

# Reasons whose HTTP status differs from their gRPC code's.
_STATUS_BY_REASON: dict[str, int] = {
    AgentTypeInactive.default_reason: 422,  # DESIGN §6: spawning from an inactive type is a 422
    AgentTypeInUse.default_reason: 409,  # agents still use the type: a conflict with their state
    # A request for input has its one response (a person's, or the system's at its expiry).
    InputAlreadyAnswered.default_reason: 409,
    InputRequestExpired.default_reason: 409,
    RunCancelled.default_reason: 409,  # or its run was cancelled while it waited
    RequestTooLarge.default_reason: 413,
    MessageTooLarge.default_reason: 413,
    TooManyMessages.default_reason: 413,
    EventTooLarge.default_reason: 413,
    TooManyEvents.default_reason: 413,
    HistoryTrimmed.default_reason: 410,
    # OpenAI answers what it cannot honour, or a value it refuses, with a 400.
    UnsupportedParameter.default_reason: 400,
    InvalidParameterValue.default_reason: 400,
    PreviousResponseNotFound.default_reason: 400,
    ResponseNotCancellable.default_reason: 400,
    ResponseNotDeletable.default_reason: 400,
}

# A caller over its rate or over one of its project's limits (QuotaExceeded).
_RATE_LIMIT_REASONS = (RateLimited.default_reason, QuotaExceeded.default_reason)

_OPENAI_PATH = re.compile(r"^(/agents/[^/]+/[^/]+)?/v1/")


def http_status(error: DomainError) -> int:
    return _STATUS_BY_REASON.get(error.reason) or _STATUS_BY_CODE.get(error.code, 500)


def error_headers(error: DomainError, status: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    if status == 401:
        # RFC 6750's challenge; `reason` (an auth-param extension) is the ErrorInfo reason gRPC
        # clients get, e.g. TOKEN_REVOKED, so programs can tell "sign in again" from a typo.
        challenge = "Bearer"
        if error.reason not in ("", "TOKEN_MISSING", "UNAUTHENTICATED"):
            challenge = f'Bearer error="invalid_token", reason="{error.reason}"'
        headers["WWW-Authenticate"] = challenge
    retry_after = error.metadata.get(RETRY_AFTER_SECONDS)
    if retry_after:
        headers["Retry-After"] = retry_after
    elif status == 429:
        headers["Retry-After"] = "1"
    return headers


def is_openai_path(path: str) -> bool:
    return bool(_OPENAI_PATH.match(path))


def openai_error_body(error: DomainError, status: int | None = None) -> dict[str, Any]:
    """OpenAI's error object for a DomainError (also sent as an SSE event when a stream fails)."""
    status = status or http_status(error)
    code = error.reason.lower()
    if status == 401:
        code = "invalid_api_key"
    kind = None
    if status == 429 and error.reason in _RATE_LIMIT_REASONS:
        # DESIGN §12: OpenAI's type for a refusal to retry later, which its clients back off on.
        code = kind = "rate_limit_exceeded"
    return _openai_error(
        error.message,
        status=status,
        param=error.violations[0].field if error.violations else None,
        code=code,
        kind=kind,
    )


def field_violations(violations: Sequence[FieldViolation]) -> list[dict[str, str]]:
    """A BadRequest's field violations as a REST error body carries them."""
    return [{"field": violation.field, "description": violation.description} for violation in violations]


def rest_error_body(detail: Any, violations: Sequence[FieldViolation] = ()) -> dict[str, Any]:
    """`{"detail": …}`, with the field violations when the request was invalid."""
    body: dict[str, Any] = {"detail": detail}
    if violations:
        body["field_violations"] = field_violations(violations)
    return body


def _openai_error(
    message: str, *, status: int, param: str | None, code: str | None, kind: str | None = None
) -> dict[str, Any]:
    if kind is None:
        kind = "server_error" if status >= 500 else "requests" if status == 429 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(path: str, error: DomainError) -> JSONResponse:
    """The response for a DomainError on `path`, in that route's shape."""
    status = http_status(error)
    if status >= 500:
        logger.warning("%s failed: %s (%s)", path, error.message, error.reason)
    if is_openai_path(path):
        body = openai_error_body(error, status)
    else:
        body = rest_error_body(error.message, error.violations)
    return JSONResponse(body, status_code=status, headers=error_headers(error, status))


def install_error_handlers(app: FastAPI) -> None:
    """Domain errors, validation errors, HTTP errors and crashes, each in the route's shape."""

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, error: DomainError) -> JSONResponse:
        return error_response(request.scope["path"], error)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        if not is_openai_path(request.scope["path"]):
            body = rest_error_body(_jsonable(problems), _violations(problems))
            return JSONResponse(body, status_code=422)
        first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
        param = _field(first["loc"]) or None
        message = f"{param}: {first['msg']}" if param else str(first["msg"])
        return JSONResponse(_openai_error(message, status=422, param=param, code="invalid_request"), 422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        headers = dict(error.headers or {})
        if not is_openai_path(request.scope["path"]):
            return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=headers)
        body = _openai_error(str(error.detail), status=error.status_code, param=None, code=None)
        return JSONResponse(body, status_code=error.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def crash(request: Request, error: Exception) -> JSONResponse:
        trace_id, _ = telemetry.current_trace_ids()
        logger.error(
            "unhandled error in %s %s (trace_id=%s)",
            request.method,
            request.scope["path"],
            trace_id or "-",
            exc_info=error,
        )
        if is_openai_path(request.scope["path"]):
            return JSONResponse(_openai_error("internal error", status=500, param=None, code=None), 500)
        return JSONResponse({"detail": "internal error"}, status_code=500)


def _field(location: Sequence[Any]) -> str:
    """A request validation problem's field path, without where it was (body, query, path)."""
    return ".".join(str(part) for part in location[1:])


def _violations(problems: Sequence[Any]) -> list[FieldViolation]:
    return [FieldViolation(_field(problem["loc"]), str(problem["msg"])) for problem in problems]


def _jsonable(problems: Any) -> Any:
    """Validation errors as JSON: pydantic puts the offending exception object in `ctx`."""
    cleaned = []
    for problem in problems:
        problem = dict(problem)
        if "ctx" in problem:
            problem["ctx"] = {key: str(value) for key, value in problem["ctx"].items()}
        problem.pop("input", None)  # never echo what was sent (it may hold a password)
        cleaned.append(problem)
    return jsonable_encoder(cleaned)
