"""Which failed calls to the memory service or the registry are worth making again: the one
definition every retry loop of the executor uses (appends, the outbox, reports of runs' ends)."""

from __future__ import annotations

import grpc

from agentmesh.runtime.errors import DomainError

# What a peer that is down, restarting or losing its database answers. RESOURCE_EXHAUSTED is not
# among them: memory answers it for an event too large, gRPC for a message over its size limit,
# and neither gets better by sending the same thing again.
TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)


def is_transient(error: BaseException) -> bool:
    """Whether a failed call may succeed when made again."""
    return isinstance(error, TimeoutError) or (
        isinstance(error, DomainError) and error.code in TRANSIENT_CODES
    )
