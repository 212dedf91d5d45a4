"""Double texting on the executor (the registry decides: registry `turns.py`). A user's message
is its session's next turn: the registry starts its run behind the session's turns still in
flight (or refuses it under `reject`). The run records its input — an acknowledged message is in
the log whatever happens next — and then, before it starts, waits for those turns to end: under
`enqueue` they finish, under `interrupt` they are cancelled first (here when this executor holds
them, else by their executor on its next lease renewal). Delegated and sub-agent runs are part
of their caller's turn and wait for nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError, FieldViolation

logger = logging.getLogger(__name__)

POLICIES = ("reject", "enqueue", "interrupt")
DEFAULT_POLICY = "enqueue"
INTERRUPTED = "interrupted by a newer message in its session"
_WAIT_SECONDS = 10.0  # one AwaitSessionTurn call; the wait goes on until the turn comes
_RETRY_SECONDS = 0.5
_RETRIED = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN", "RESOURCE_EXHAUSTED")


def policy_violations(request: executor_service_pb2.RunRequest) -> list[FieldViolation]:
    if request.double_texting and request.double_texting not in POLICIES:
        return [FieldViolation("double_texting", f"must be one of {', '.join(POLICIES)}")]
    return []


def turn_policy(request: executor_service_pb2.RunRequest, spec: resources_pb2.AgentSpec) -> str:
    """The policy a run's turn follows: the request's, else its agent's, else enqueue; "" for a
    run that is no turn of its own (delegated, or a workflow's sub-agent)."""
    if request.delegation_id or request.as_sub_agent or request.delegation_depth > 0:
        return ""
    return request.double_texting or spec.double_texting or DEFAULT_POLICY


async def await_turn(
    registry: RegistryClient,
    agent_id: str,
    run_id: str,
    *,
    policy: str,
    runs_ahead: tuple[str, ...],
    interrupt: Callable[[str], None],
    metadata: Metadata | None,
) -> None:
    """Returns once none of the session's earlier turns is in flight: under `interrupt`, after
    cancelling those this executor holds. The registry is asked again through its outages (the
    run's lease is renewed meanwhile)."""
    if not runs_ahead:
        return
    if policy == "interrupt":
        for ahead in runs_ahead:
            interrupt(ahead)
    ahead = list(runs_ahead)
    while ahead:
        try:
            ahead = await registry.await_session_turn(
                agent_id, run_id, wait_seconds=_WAIT_SECONDS, metadata=metadata
            )
        except DomainError as error:
            if error.code.name not in _RETRIED:
                raise
            logger.warning("run %s could not ask for its turn: %s", run_id, error)
            await asyncio.sleep(_RETRY_SECONDS)
