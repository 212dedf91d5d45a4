"""How a run ends (`Ending`: answered, failed or cancelled, or refused before its loop began), and
how it records its end when it does not answer (`Run.end` decides which): its loop failed
(`record_failure`: the `error` with its code, then RunFailed on the stream) or was cancelled
(`record_cancelled`); or it ended before its loop began with its input in the log already — a
resumed run (`record_early_end`: refused or cancelled; its caller gets the gRPC status). All under
the run's one end key (recorder.end_key); and what an answer's event records (`result_metadata`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from agentmesh.executor.context.events import usage_proto
from agentmesh.executor.context.scope import RunFailure, RunResult, RunScope
from agentmesh.executor.durability.recorder import EventType, Recorder, RunSuperseded, end_key
from agentmesh.executor.errors import run_failed
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.runtime.errors import DomainError, FieldViolation
from agentmesh.runtime.interceptors import current_deadline

logger = logging.getLogger(__name__)

_DEADLINE_SLACK_SECONDS = 0.05


@dataclass(frozen=True)
class Ending:
    """How a run ends: its answer (`result`, recorded as the event `answer_seq`), a failure (a
    gRPC status name, message and reason; before its loop began, a refusal), or a cancellation
    (`cancelled`, with `reason` when it was cancelled from here rather than by its caller).
    `unexpected`: a failure no rule raised (a bug), which before the loop records nothing.
    `registry_started`: False when the registry refused to start the run, or its start failed
    before any answer: the registry then has no run to finish."""

    result: RunResult | None = None
    answer_seq: int = 0
    code: str = ""
    message: str = ""
    reason: str | None = None
    metadata: Mapping[str, str] | None = None
    violations: Sequence[FieldViolation] = ()
    cancelled: bool = False
    unexpected: bool = False
    registry_started: bool = True

    @classmethod
    def failure(cls, error: Exception, *, registry_started: bool = True) -> Ending:
        if isinstance(error, RunFailure):
            return cls(code=error.code, message=error.message, reason=error.reason)
        if isinstance(error, DomainError):
            return cls(
                code=error.code.name,
                message=error.message,
                reason=error.reason,
                metadata=error.metadata,
                violations=error.violations,
                registry_started=registry_started,
            )
        internal = grpc.StatusCode.INTERNAL.name
        return cls(
            code=internal,
            message="internal error",
            reason=internal,
            unexpected=True,
            registry_started=registry_started,
        )


async def record_failure(
    scope: RunScope,
    code: str,
    message: str,
    reason: str,
    *,
    metadata: Mapping[str, str] | None = None,
    violations: Sequence[FieldViolation] = (),
    cleanup_timeout_seconds: float,
    before_end: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Records the run's `error` under its end key, then (after `before_end`: the run's turn
    released) emits RunFailed and closes the stream.
    Raises RunSuperseded, emitting nothing, when the memory service says the run was taken over
    meanwhile: its taker's end is the run's, and the caller follows the log to it."""
    seq = 0
    try:
        event = await scope.recorder.record_end(
            EventType.EVENT_TYPE_ERROR,
            message,
            metadata={"reason": reason, "code": code},
            parent_event_id=scope.input_event_id,
            idempotency_key=end_key(scope.origin.run_id),
            timeout_seconds=cleanup_timeout_seconds,
        )
        seq = event.seq if event else 0
    except DomainError as error:
        logger.warning("could not record the failure of run %s: %s", scope.origin.run_id, error)
    if before_end is not None:
        await before_end()
    failed = run_failed(code, message, reason, metadata=metadata, violations=violations)
    failed.usage.CopyFrom(usage_proto(scope.meter.tree))  # what it spent, its delegations' too
    await scope.sink.emit(scope.origin.event(seq=seq, run_failed=failed))
    scope.sink.close()


def deadline_passed() -> bool:
    """Whether the current call's deadline has passed."""
    deadline = current_deadline.get()
    # gRPC's clock fires the deadline, ours reads it: allow them a little disagreement.
    return deadline is not None and time.monotonic() >= deadline - _DEADLINE_SLACK_SECONDS


async def record_cancelled(scope: RunScope, reason: str | None, *, cleanup_timeout_seconds: float) -> None:
    timed_out = deadline_passed()
    try:
        await scope.recorder.record_end(
            EventType.EVENT_TYPE_ERROR,
            "the run was cancelled"
            + (f": {reason}" if reason else " (deadline exceeded)" if timed_out else ""),
            metadata={
                "cancelled": True,
                "code": "DEADLINE_EXCEEDED" if timed_out and not reason else "CANCELLED",
                **({"reason": reason} if reason else {}),
            },
            parent_event_id=scope.input_event_id,
            idempotency_key=end_key(scope.origin.run_id),
            timeout_seconds=cleanup_timeout_seconds,
        )
    except RunSuperseded as superseded:  # its taker records the end (the recorder remembers)
        logger.info("run %s stops without an end here: %s", scope.origin.run_id, superseded)
    except Exception:
        logger.exception("could not record that run %s was cancelled", scope.origin.run_id)


async def record_early_end(
    recorder: Recorder,
    early_input: asyncio.Future[memory_pb2.Event],
    message: str,
    metadata: dict[str, Any],
    *,
    cleanup_timeout_seconds: float,
) -> None:
    """Records the end of a run that ended before its loop began with its input in the log (a
    resumed run): a session never ends on an unanswered input."""
    try:
        received = await early_input
        await recorder.record_end(
            EventType.EVENT_TYPE_ERROR,
            message,
            metadata=metadata,
            parent_event_id=received.id,
            idempotency_key=end_key(recorder.run_id),
            timeout_seconds=cleanup_timeout_seconds,
        )
    except Exception:
        logger.warning("could not record the end of refused run %s", recorder.run_id, exc_info=True)


def result_metadata(result: RunResult) -> dict[str, Any]:
    total = result.total_usage
    metadata: dict[str, Any] = {
        "steps": result.steps,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        # The whole tree's, for a caller that learns the run's end from the log rather than its
        # stream (its cost null when unknown).
        "tree_usage": {
            "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens,
            "cached_input_tokens": total.cached_input_tokens,
            "cost": total.cost if total.cost_known else None,
            "unpriced_models": sorted(total.unpriced),
        },
        **result.metadata,
    }
    if result.max_steps_reached:
        metadata["max_steps_reached"] = True
    if result.escalated:
        metadata["escalated"] = True
    return metadata
