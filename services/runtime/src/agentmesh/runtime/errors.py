"""Domain errors: the one source of truth for how failures become gRPC statuses and back.

A service raises a `DomainError` subclass; the server interceptor turns it into a rich
`google.rpc.Status` (an `ErrorInfo` with the reason, plus `BadRequest` field violations where
given); `from_rpc_error` turns such a status back into the same typed exception on the client.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

logger = logging.getLogger(__name__)

ERROR_DOMAIN = "agentmesh.dev"
# The reason of a call that failed in transport (the peer could not be reached, the connection
# broke): gRPC itself ended it, not the peer's code. Its metadata names the peer service.
PEER_UNAVAILABLE = "PEER_UNAVAILABLE"
# ErrorInfo metadata: which service a transport failure concerns ("registry", "memory", …).
PEER_SERVICE = "service"
# Why a call is UNAUTHENTICATED for its bearer token (runtime.identity).
TOKEN_MISSING = "TOKEN_MISSING"
TOKEN_INVALID = "TOKEN_INVALID"
TOKEN_EXPIRED = "TOKEN_EXPIRED"
# The token was valid, but what it stood for changed: logout, deactivation, a role change.
TOKEN_REVOKED = "TOKEN_REVOKED"
# Why a call to an internal service is UNAUTHENTICATED for its service credential
# (runtime.service_identity).
SERVICE_CREDENTIAL_MISSING = "SERVICE_CREDENTIAL_MISSING"
SERVICE_CREDENTIAL_INVALID = "SERVICE_CREDENTIAL_INVALID"
# ErrorInfo metadata of a refusal that may be retried later: the seconds to wait (HTTP
# `Retry-After`; a `google.rpc.RetryInfo` detail on gRPC).
RETRY_AFTER_SECONDS = "retry_after_seconds"
# ErrorInfo metadata of a refusal for a limit: the limit's subject (`project:<id>`, `user:<id>`)
# and name (`concurrent_runs`, …), also sent as a `google.rpc.QuotaFailure` detail.
QUOTA_SUBJECT = "quota_subject"
QUOTA_LIMIT = "quota_limit"
# Addresses as gRPC core writes them into its messages (ipv4:127.0.0.1:38154, [::1]:50051, …).
_ADDRESS = re.compile(
    r"\b(?:ipv4|ipv6|unix|dns):[^\s,;)]+|\[[0-9a-fA-F:]+\]:\d+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?"
)


@dataclass(frozen=True)
class FieldViolation:
    """One bad field of a request: its path (e.g. `agent.name`) and what is wrong with it."""

    field: str
    description: str


class DomainError(Exception):
    """A failure the caller can act on. Subclasses fix the gRPC code; `reason` is UPPER_SNAKE."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    default_reason: str = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        violations: Sequence[FieldViolation] = (),
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.violations = tuple(violations)
        self.metadata = dict(metadata or {})

    def status_proto(self) -> status_pb2.Status:
        """This error as a `google.rpc.Status` message (what RunFailed carries)."""
        return rich_status(
            self.code, self.message, reason=self.reason, violations=self.violations, metadata=self.metadata
        )

    def to_status(self) -> grpc.Status:
        """This error as the status a server aborts a call with."""
        return rpc_status.to_status(self.status_proto())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, reason={self.reason!r})"


def rich_status(
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str,
    violations: Sequence[FieldViolation] = (),
    metadata: Mapping[str, str] | None = None,
) -> status_pb2.Status:
    """A `google.rpc.Status`: the code and message, an `ErrorInfo` with the reason (and its
    metadata), and a `BadRequest` with the field violations when there are some."""
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=dict(metadata or {})))
    details = [info]
    if violations:
        bad_request = any_pb2.Any()
        bad_request.Pack(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                    for v in violations
                ]
            )
        )
        details.append(bad_request)
    details += _retry_details(metadata or {})
    return status_pb2.Status(code=code.value[0], message=message, details=details)


def _retry_details(metadata: Mapping[str, str]) -> list[any_pb2.Any]:
    """RetryInfo and QuotaFailure details for what the ErrorInfo metadata says, for clients that
    read the standard details rather than the metadata (the metadata travels both ways: a client
    maps the status back to the same error, and the details are written again on each hop)."""
    details = []
    retry_after = metadata.get(RETRY_AFTER_SECONDS)
    if retry_after and retry_after.isdigit():
        retry = any_pb2.Any()
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(retry_after))))
        details.append(retry)
    if QUOTA_LIMIT in metadata:
        quota = any_pb2.Any()
        subject, limit = metadata.get(QUOTA_SUBJECT, ""), metadata[QUOTA_LIMIT]
        if subject.startswith("project:"):
            limit = f"project.limits.{limit}"  # the field a superuser sets it by
        violation = error_details_pb2.QuotaFailure.Violation(
            subject=subject, description=f"limit {limit} reached"
        )
        quota.Pack(error_details_pb2.QuotaFailure(violations=[violation]))
        details.append(quota)
    return details


class InvalidArgument(DomainError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = "INVALID_ARGUMENT"


class ValidationFailed(InvalidArgument):
    """Request fields are missing or malformed: the message names each field and what is wrong
    with it, and `violations` (a BadRequest on the wire) list them for programs. Every service
    reports bad input in this one format."""

    @classmethod
    def of(cls, violations: Sequence[FieldViolation]) -> ValidationFailed:
        fields = ", ".join(dict.fromkeys(v.field for v in violations))
        details = "; ".join(f"{v.field}: {v.description}" for v in violations)
        return cls(f"invalid {fields} ({details})", violations=violations)

    @classmethod
    def field(cls, field: str, description: str) -> ValidationFailed:
        """One field is missing or malformed."""
        return cls.of([FieldViolation(field, description)])


class MalformedRequest(InvalidArgument):
    """The request's bytes are not a message of the method's request type (a corrupt wire
    format, invalid UTF-8 in a string, nesting past protobuf's depth limit)."""

    default_reason = "MALFORMED_REQUEST"


class InvalidPageToken(InvalidArgument):
    """A page token that this service did not issue, or issued for another list or other filters
    (runtime.pagination)."""

    default_reason = "INVALID_PAGE_TOKEN"

    def __init__(self, message: str = "page_token is not a token this service issued") -> None:
        super().__init__(message, violations=[FieldViolation("page_token", message)])


class NotFound(DomainError):
    code = grpc.StatusCode.NOT_FOUND
    default_reason = "NOT_FOUND"


class AlreadyExists(DomainError):
    code = grpc.StatusCode.ALREADY_EXISTS
    default_reason = "ALREADY_EXISTS"


class FailedPrecondition(DomainError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = "FAILED_PRECONDITION"


class PermissionDenied(DomainError):
    code = grpc.StatusCode.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class Unauthenticated(DomainError):
    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class TokenRevoked(Unauthenticated):
    """A well-signed access token that no longer stands for anything: its user signed out, was
    deactivated, deleted, or changed role since it was issued, or its API key was revoked. Signing
    in again gives a new one."""

    default_reason = TOKEN_REVOKED


class ResourceExhausted(DomainError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "RESOURCE_EXHAUSTED"


class QuotaExceeded(ResourceExhausted):
    """A limit of the caller's project or user is reached (`subject`, e.g. `project:<id>`, and
    the limit's name): retry after `retry_after_seconds`. Any service that enforces a limit
    raises it; on the wire it carries RetryInfo and QuotaFailure details."""

    default_reason = "QUOTA_EXCEEDED"

    def __init__(self, message: str, *, subject: str, limit: str, retry_after_seconds: float) -> None:
        seconds = max(1, math.ceil(retry_after_seconds))
        super().__init__(
            message,
            metadata={RETRY_AFTER_SECONDS: str(seconds), QUOTA_SUBJECT: subject, QUOTA_LIMIT: limit},
        )
        self.retry_after_seconds = seconds


class Aborted(DomainError):
    code = grpc.StatusCode.ABORTED
    default_reason = "ABORTED"


class OutOfRange(DomainError):
    code = grpc.StatusCode.OUT_OF_RANGE
    default_reason = "OUT_OF_RANGE"


class Unavailable(DomainError):
    code = grpc.StatusCode.UNAVAILABLE
    default_reason = "UNAVAILABLE"


class DeadlineExceeded(DomainError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED
    default_reason = "DEADLINE_EXCEEDED"


class Cancelled(DomainError):
    code = grpc.StatusCode.CANCELLED
    default_reason = "CANCELLED"


class Internal(DomainError):
    code = grpc.StatusCode.INTERNAL
    default_reason = "INTERNAL"


class SuperuserRequired(PermissionDenied):
    """An operation only superusers (and the mesh's own services) may perform."""

    default_reason = "SUPERUSER_REQUIRED"


class SystemRequired(PermissionDenied):
    """An operation only the mesh's own services (the system principal) may perform."""

    default_reason = "SYSTEM_REQUIRED"


_BY_CODE: dict[grpc.StatusCode, type[DomainError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        PermissionDenied,
        Unauthenticated,
        ResourceExhausted,
        Aborted,
        OutOfRange,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
        Internal,
    )
}


def error_for_code(code: grpc.StatusCode) -> type[DomainError]:
    """The DomainError subclass for a gRPC code (Internal for codes without one)."""
    return _BY_CODE.get(code, Internal)


def from_rpc_error(error: grpc.RpcError, *, method: str = "") -> DomainError:
    """Maps a failed call back to the typed error the server raised, reason and violations kept.

    A failure without a rich status was not raised by the peer's code: gRPC ended the call (the
    peer could not be reached, the connection broke, the deadline passed). Its text is gRPC
    core's, with the peer's address in it, so it is logged for operators and replaced, for
    callers, by what failed in their terms: which service (from `method`, the full method name)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = (error.details() if hasattr(error, "details") else None) or code.name
    status = rpc_status.from_call(error) if hasattr(error, "trailing_metadata") else None
    if status is None:
        return _transport_error(code, message, method)
    return from_status_proto(status)


# Services declared in `agentmesh.common` (so that every service may call them without depending on
# the registry's protos) and the service that serves them.
_SHARED_SERVICES_SERVED_BY = {
    "agentmesh.common.v1.CredentialStatusService": "registry",
    "agentmesh.common.v1.ProjectOwnerService": "registry",
}


def peer_service(method: str) -> str:
    """The service a full method name belongs to: "registry" for
    /agentmesh.registry.v1.RegistryService/Login and for
    /agentmesh.internal.registry.v1.RegistryInternalService/ResolveAgent and for the registry's
    shared services such as /agentmesh.common.v1.CredentialStatusService/GetCredentialStatus, else
    the service's own name."""
    service = method.lstrip("/").partition("/")[0]
    if service in _SHARED_SERVICES_SERVED_BY:
        return _SHARED_SERVICES_SERVED_BY[service]
    parts = service.split(".")
    if len(parts) >= 4 and parts[:2] == ["agentmesh", "internal"]:
        return parts[2]
    if len(parts) >= 3 and parts[0] == "agentmesh":
        return parts[1]
    return parts[-1] or "peer"


def _transport_error(code: grpc.StatusCode, details: str, method: str) -> DomainError:
    service = peer_service(method) if method else "peer"
    logger.warning("call %s failed in transport: %s: %s", method or "?", code.name, details)
    metadata = {PEER_SERVICE: service}
    if code is grpc.StatusCode.UNAVAILABLE:
        return Unavailable(
            f"the {service} service is unavailable", reason=PEER_UNAVAILABLE, metadata=metadata
        )
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"the {service} service did not answer in time", metadata=metadata)
    return error_for_code(code)(
        f"the call to the {service} service failed: {scrub_addresses(details)}",
        reason=code.name,
        metadata=metadata,
    )


def scrub_addresses(text: str) -> str:
    """`text` with network addresses replaced by "<address>"."""
    return _ADDRESS.sub("<address>", text)


def from_status_proto(status: status_pb2.Status) -> DomainError:
    """The typed error a `google.rpc.Status` stands for (a failed call's, or a RunFailed's),
    with its reason, field violations and metadata."""
    code = _CODES_BY_VALUE.get(status.code, grpc.StatusCode.UNKNOWN)
    reason = code.name
    violations: list[FieldViolation] = []
    metadata: dict[str, str] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
            metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
    message = status.message or code.name
    return error_for_code(code)(message, reason=reason, violations=violations, metadata=metadata)


_CODES_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}
