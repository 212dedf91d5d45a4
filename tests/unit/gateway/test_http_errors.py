"""One table from domain errors to HTTP statuses, and the two error shapes."""

from __future__ import annotations

import json

import pytest

from agentmesh.gateway.errors import (
    ExecutorsBusy,
    InvalidRequest,
    MessageTooLarge,
    ModelNotFound,
    RateLimited,
    RequestTooLarge,
    TokenRevoked,
)
from agentmesh.gateway.http.errors import error_response, http_status, is_openai_path
from agentmesh.runtime.errors import (
    Aborted,
    AlreadyExists,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    ValidationFailed,
)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidArgument("bad"), 422),
        (NotFound("gone"), 404),
        (AlreadyExists("taken"), 409),
        (FailedPrecondition("paused", reason="AGENT_PAUSED"), 400),
        (FailedPrecondition("in use", reason="AGENT_TYPE_IN_USE"), 409),
        (FailedPrecondition("inactive", reason="AGENT_TYPE_INACTIVE"), 422),
        (PermissionDenied("no"), 403),
        (Unauthenticated("who"), 401),
        (
            ResourceExhausted("slow down", reason="LOGIN_THROTTLED", metadata={"retry_after_seconds": "7"}),
            429,
        ),
        (RequestTooLarge(10), 413),
        (MessageTooLarge("message", 10), 413),
        (Aborted("stale"), 409),
        (Unavailable("down"), 503),
    ],
)
def test_status_of_each_error(error: DomainError, status: int) -> None:
    assert http_status(error) == status


def test_rest_errors_are_detail_with_retry_after() -> None:
    response = error_response("/api/v1/auth/login", RateLimited(2.2))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert json.loads(response.body) == {"detail": "rate limit exceeded; retry in 3 s"}
    busy = error_response("/api/v1/projects", ExecutorsBusy())
    assert busy.headers["Retry-After"] == "1"
    assert error_response("/api/v1/users/me", Unauthenticated("no")).headers["WWW-Authenticate"] == "Bearer"
    revoked = error_response("/api/v1/users/me", TokenRevoked("access token revoked"))
    assert revoked.headers["WWW-Authenticate"] == 'Bearer error="invalid_token", reason="TOKEN_REVOKED"'


def test_openai_routes_get_openai_error_objects() -> None:
    assert is_openai_path("/v1/chat/completions") and is_openai_path("/agents/p/a/v1/models")
    assert not is_openai_path("/api/v1/projects") and not is_openai_path("/agents/p/a/health")
    response = error_response("/v1/chat/completions", ModelNotFound("p/x"))
    assert response.status_code == 404
    error = json.loads(response.body)["error"]
    assert "p/x" in error.pop("message")
    assert error == {"type": "invalid_request_error", "param": "model", "code": "model_not_found"}
    limited = json.loads(error_response("/v1/models", RateLimited(1)).body)["error"]
    assert (limited["type"], limited["code"]) == ("rate_limit_exceeded", "rate_limit_exceeded")
    denied = json.loads(error_response("/v1/models", Unauthenticated("bad token")).body)["error"]
    assert denied["code"] == "invalid_api_key"


def test_invalid_input_is_one_format_mirrored_in_rest_bodies() -> None:
    """The gateway's own checks raise what every service raises for bad input; a REST body lists
    the field violations beside `detail`, and OpenAI's names the first in `param`."""
    own = InvalidRequest.field("project_id", "is required")
    service = ValidationFailed.field("project_id", "is required")
    assert (own.code, own.reason, own.message, own.violations) == (
        service.code,
        service.reason,
        service.message,
        service.violations,
    )
    rest = json.loads(error_response("/api/v1/projects", own).body)
    assert rest == {
        "detail": own.message,
        "field_violations": [{"field": "project_id", "description": "is required"}],
    }
    openai = json.loads(error_response("/v1/chat/completions", own).body)["error"]
    assert (openai["param"], openai["code"]) == ("project_id", "invalid_argument")
    assert "field_violations" not in json.loads(error_response("/api/v1/projects", NotFound("gone")).body)
