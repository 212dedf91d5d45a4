"""The executor's errors: each a DomainError with its gRPC code and UPPER_SNAKE reason, plus the
reasons of what a run reports without raising (an `error` event it recovers from, a RunFailed).

A refusal before a run starts leaves as the gRPC status of the error raised; after `run_started`,
a failure travels inside the stream as `RunFailed`, whose `status` (`run_failed` below) carries
the same code, reason and details, so callers read both the same way. Callers outside the
executor import these through `agentmesh.executor.client`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.runtime.errors import (
    FailedPrecondition,
    FieldViolation,
    Internal,
    ResourceExhausted,
    Unavailable,
    rich_status,
)

__all__ = [
    "DELEGATIONS_PER_CHAT_EXCEEDED",
    "DELEGATIONS_PER_STEP_EXCEEDED",
    "DELEGATION_CYCLE",
    "DELEGATION_NOT_ALLOWED",
    "EXECUTOR_LOST",
    "FOLLOWED_IN_LOG",
    "INVALID_BLOCK",
    "MCP_SERVER_UNAVAILABLE",
    "MODEL_FAILED",
    "NO_EXECUTOR",
    "RESUME_LIMIT",
    "SUB_AGENT_FAILED",
    "AnswerNotInFormat",
    "DelegationDepthExceeded",
    "ExecutorBusy",
    "ModelUnavailable",
    "NoSubAgents",
    "RunHandedOver",
    "RunLeaseLost",
    "RunTakenOver",
    "UnknownTool",
    "run_failed",
]

# A model call failed (after its fallbacks): the run ends with RunFailed.
MODEL_FAILED = "MODEL_FAILED"
# A workflow's sub-agent ended without an answer: the workflow run ends with RunFailed.
SUB_AGENT_FAILED = "SUB_AGENT_FAILED"
# An agent asked to delegate to one outside its network access: an `error` event, the run goes on.
DELEGATION_NOT_ALLOWED = "DELEGATION_NOT_ALLOWED"
# Bounds on the tree of runs under one chat (DelegationLimits): a delegation past one is refused
# with an `error` event, the model reads the refusal as the delegation's result, the run goes on.
# To an agent already on the delegation path (A → B → A) when the agent type allows no re-entry:
DELEGATION_CYCLE = "DELEGATION_CYCLE"
# More delegations in one model step than the type allows:
DELEGATIONS_PER_STEP_EXCEEDED = "DELEGATIONS_PER_STEP_EXCEEDED"
# The chat's tree has sent as many delegations as the type allows:
DELEGATIONS_PER_CHAT_EXCEEDED = "DELEGATIONS_PER_CHAT_EXCEEDED"
# A fenced ```delegate / ```tool_call block that does not parse: an `error` event, the run goes on.
INVALID_BLOCK = "INVALID_BLOCK"
# An agent's MCP server is not registered or cannot be reached: an `error` event naming it, and the
# run goes on without its tools.
MCP_SERVER_UNAVAILABLE = "MCP_SERVER_UNAVAILABLE"
# A run's executor died (its lease ran out) and the run was closed rather than resumed.
EXECUTOR_LOST = "EXECUTOR_LOST"
# A run taken over more often than the executor's resume limit allows fails with this.
RESUME_LIMIT = "RESUME_LIMIT"
# No executor of the pool took a run (RunRouter's RunNotPlaced).
NO_EXECUTOR = "NO_EXECUTOR"
# A run (with what it delegated) spent its budget: it ends with RunFailed, RESOURCE_EXHAUSTED.
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"


class RunHandedOver(Unavailable):
    """The executor is stopping and handed the run over (its lease released, no end recorded):
    another executor resumes it from the log, and a caller follows it there (the gateway's
    ChatStream does on UNAVAILABLE; before any event of it arrived, by the `run_id` this
    error's metadata names)."""

    default_reason = "RUN_HANDED_OVER"


class RunTakenOver(Unavailable):
    """The executor lost the run's lease (it was cut off from the registry, or stalled, for longer
    than the lease) and another executor took the run over: it stopped here with no end recorded,
    and goes on from the session's log, where a caller follows it (by the `run_id` this error's
    metadata names)."""

    default_reason = "RUN_TAKEN_OVER"


class RunLeaseLost(Unavailable):
    """The executor lost the run's lease before it recorded anything of it: nothing of the run
    exists anywhere, so it may be sent again (to another executor)."""

    default_reason = "RUN_LEASE_LOST"


# A run stopped with one of these reasons goes on from the session's log: it is followed there,
# never sent to another executor again (its input is recorded already).
FOLLOWED_IN_LOG = frozenset({RunHandedOver.default_reason, RunTakenOver.default_reason})


class ExecutorBusy(ResourceExhausted):
    """The executor runs as many runs as it may; the caller should try another executor."""

    default_reason = "EXECUTOR_BUSY"


class AnswerNotInFormat(Internal):
    """The run's answer is not of the shape its request asked for (OpenAI's `response_format`):
    the model failed to follow it, so the run fails rather than answer with what the client
    cannot read."""

    default_reason = "ANSWER_NOT_IN_FORMAT"


class DelegationDepthExceeded(FailedPrecondition):
    """A delegation (or a workflow's sub-agent) would nest runs deeper than the configured limit."""

    default_reason = "DELEGATION_DEPTH_EXCEEDED"


class NoSubAgents(FailedPrecondition):
    """A workflow agent (sequential, parallel, loop) with no sub-agents to run."""

    default_reason = "NO_SUB_AGENTS"


class ModelUnavailable(FailedPrecondition):
    """The agent's model cannot be reached from this executor as configured."""

    default_reason = "MODEL_UNAVAILABLE"


class UnknownTool(FailedPrecondition):
    """The agent names a function tool this executor does not have."""

    default_reason = "UNKNOWN_TOOL"


def run_failed(
    code: str,
    message: str,
    reason: str,
    *,
    metadata: Mapping[str, str] | None = None,
    violations: Sequence[FieldViolation] = (),
) -> run_pb2.RunFailed:
    """The RunFailed that ends a run: the code name and message as they always were, and the
    same as a `google.rpc.Status` (with an ErrorInfo holding `reason`) for programs."""
    status = rich_status(
        getattr(grpc.StatusCode, code, grpc.StatusCode.INTERNAL),
        message,
        reason=reason,
        violations=violations,
        metadata=metadata,
    )
    return run_pb2.RunFailed(code=code, message=message, status=status)
