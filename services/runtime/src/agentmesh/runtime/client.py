"""Base for service clients: the one place where a failed call becomes the typed DomainError the
server raised, so callers handle `NotFound`, `FailedPrecondition`, … instead of status codes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from agentmesh.runtime.errors import from_rpc_error

Metadata = Sequence[tuple[str, str]]


async def unary(
    method: Any, request: Any, *, timeout: float | None = None, metadata: Metadata | None = None
) -> Any:
    """Calls a unary stub method; a failure raises the matching DomainError."""
    try:
        return await method(request, timeout=timeout, metadata=metadata)
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, method=_method_name(method)) from None


async def stream(
    method: Any, request: Any, *, timeout: float | None = None, metadata: Metadata | None = None
) -> AsyncIterator[Any]:
    """Iterates a server-streaming stub method; a failure raises the matching DomainError.
    Leaving the iteration early (or being cancelled) cancels the call."""
    call = method(request, timeout=timeout, metadata=metadata)
    try:
        async for response in call:
            yield response
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, method=_method_name(method)) from None
    finally:
        call.cancel()


def _method_name(method: Any) -> str:
    """The full method name of a stub's multi-callable (grpc.aio keeps it as bytes), to say which
    service a transport failure concerns; "" when it cannot be read."""
    name = getattr(method, "_method", b"")
    return name.decode() if isinstance(name, bytes) else str(name or "")
