"""Which failed calls to the memory service or the registry are worth making again: the one
definition every retry loop of the executor uses (appends, the outbox, reports of runs' ends)."""

from __future__ import annotations

import grpc

from agentmesh.runtime.errors import DomainError

# What a peer that is down, restarting or losing its database answers.
TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)
# RESOURCE_EXHAUSTED with no reason of its own: a server that shed the call because too many were
# waiting (`max_pending_calls`), which passes. With a reason it is the request itself (memory's
# EVENT_TOO_LARGE, TOO_MANY_EVENTS), and sending it again changes nothing.
_SHED = grpc.StatusCode.RESOURCE_EXHAUSTED


def is_transient(error: BaseException) -> bool:
    """Whether a failed call may succeed when made again."""
    if isinstance(error, TimeoutError):
        return True
    if not isinstance(error, DomainError):
        return False
    return error.code in TRANSIENT_CODES or (error.code == _SHED and error.reason == _SHED.name)
