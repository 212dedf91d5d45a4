"""Domain errors: the one source of truth for how failures become gRPC statuses and back.

A service raises a `DomainError` subclass; the server interceptor turns it into a rich
`google.rpc.Status` (an `ErrorInfo` with the reason, plus `BadRequest` field violations where
given); `from_rpc_error` turns such a status back into the same typed exception on the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

ERROR_DOMAIN = "agentmesh.dev"


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
    return status_pb2.Status(code=code.value[0], message=message, details=details)


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


class ResourceExhausted(DomainError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "RESOURCE_EXHAUSTED"


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


def from_rpc_error(error: grpc.RpcError) -> DomainError:
    """Maps a failed call back to the typed error the server raised, reason and violations kept."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = (error.details() if hasattr(error, "details") else None) or code.name
    status = rpc_status.from_call(error) if hasattr(error, "trailing_metadata") else None
    if status is None:
        return error_for_code(code)(message, reason=code.name)
    return from_status_proto(status)


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
