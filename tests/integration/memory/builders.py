"""Small builders for memory requests in tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition

EventType = resources_pb2.EventType


def new_event(
    content: str = "hello",
    *,
    agent: str = "assistant",
    event_type: int = EventType.EVENT_TYPE_USER_MESSAGE,
    metadata: dict[str, Any] | None = None,
    **fields: str,
) -> pb.NewEvent:
    event = pb.NewEvent(agent=agent, event_type=event_type, content=content, **fields)
    if metadata:
        event.metadata.update(metadata)
    return event


def delegation_response(run_id: str, delegation_id: str) -> pb.NewEvent:
    """Run `run_id`'s one response to its delegation `delegation_id` (under its own key)."""
    return new_event(
        "{}",
        event_type=EventType.EVENT_TYPE_DELEGATION_RESPONSE,
        run_id=run_id,
        delegation_id=delegation_id,
        idempotency_key=f"{delegation_id}:response",
    )


def refusals(outcomes: Sequence[object], reason: str) -> int:
    """How many of the appends `asyncio.gather(..., return_exceptions=True)` gave back were refused
    FAILED_PRECONDITION with `reason`; any other failure fails the test."""
    refused = 0
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, FailedPrecondition), outcome
            assert outcome.reason == reason, outcome
            refused += 1
    return refused
