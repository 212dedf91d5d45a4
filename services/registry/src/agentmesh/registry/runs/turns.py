"""Double texting (DESIGN §5, durability): a user's message for a session whose
previous run is still in flight follows a policy — `reject` (ABORTED, SESSION_BUSY, naming the
run in flight), `enqueue` (the run waits for the earlier turns and runs after them, in order) or
`interrupt` (the earlier turns are cancelled, then the run goes).

The registry decides, not a gateway or an executor: its run leases know every run in flight on
every executor, and taking a turn is one transaction serialized per session, so the policy holds
across gateway replicas and executors. The run is started first and its turn taken after — a
turn counts only while its run is in flight, so a refused run is finished again at once. The
executor holding an interrupted run learns it from its next lease renewal (`interrupted`), the
waiting run from `AwaitSessionTurn`.

A session whose turn is a run suspended for a person's input takes no new message, whatever the
policy: the message is refused (FAILED_PRECONDITION, INPUT_REQUIRED, naming the requests) before
its run starts, rather than wait for an answer that may take a day or interrupt a run that is
waiting for a person. The session goes on once they are answered.
"""

from __future__ import annotations

import asyncio
import time

from agentmesh.registry.clock import utc_now
from agentmesh.registry.errors import SessionAwaitsInput, SessionBusy
from agentmesh.registry.models import DOUBLE_TEXTING_POLICIES, Agent, FinishedRun, PageRequest
from agentmesh.registry.runs.bookkeeping import RunBookkeeping, StartedRun
from agentmesh.registry.runs.input_models import InputRequestState
from agentmesh.registry.store import InputRequestStore, RunLease, RunLeaseStore
from agentmesh.runtime.errors import FieldViolation, ValidationFailed
from agentmesh.runtime.identity import Principal

POLICIES = DOUBLE_TEXTING_POLICIES
MAX_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.1


def check_policy(field: str, policy: str) -> None:
    """Raises INVALID_ARGUMENT naming `field` unless `policy` is one of POLICIES."""
    if policy not in POLICIES:
        raise ValidationFailed.field(field, f"must be one of {', '.join(POLICIES)}")


class SessionTurns:
    """Starts runs as their session's turns and tells waiting runs when their turn has come."""

    def __init__(self, registry: RunBookkeeping, store: RunLeaseStore, inputs: InputRequestStore) -> None:
        self._registry = registry
        self._store = store
        self._inputs = inputs

    async def start_run(
        self,
        principal: Principal,
        agent_id: str,
        run_id: str,
        *,
        session_id: str,
        policy: str,
        lease: RunLease | None,
    ) -> tuple[StartedRun, list[str]]:
        """Starts the run (as `RunBookkeeping.start_run`) as the session's next turn: the run
        started and the run ids of the turns still in flight before it. Raises
        SessionBusy under `reject` when there are any, SessionAwaitsInput under every policy when
        a run of the session waits for a person (the run is then finished again)."""
        check_policy("double_texting", policy)
        if not session_id:
            raise ValidationFailed.field("session_id", "is required with double_texting")
        started = await self._registry.start_run(
            principal, agent_id, run_id, lease=lease, session_id=session_id
        )
        agent = started.agent
        # Only a session with a turn in flight can be waiting for input: asked after the turn is
        # taken (no query on the common path) — except under `interrupt`, which must not touch a
        # run that waits for a person, so asks first.
        if policy == "interrupt":
            await self._refuse_if_waiting(principal, agent, run_id, session_id)
        ahead = await self._store.take_turn(
            f"{agent.project_id}/{session_id}",
            (agent_id, run_id),
            reject=policy == "reject",
            interrupt=policy == "interrupt",
        )
        if ahead and policy != "interrupt":
            await self._refuse_if_waiting(principal, agent, run_id, session_id)
        if ahead and policy == "reject":
            agent = await self._registry.finish_run(principal, _refused(agent_id, run_id))
            raise SessionBusy(session_id, ahead[-1][1])
        return started, [key[1] for key in ahead]

    async def _refuse_if_waiting(
        self, principal: Principal, agent: Agent, run_id: str, session_id: str
    ) -> None:
        """Refuses the run (finishing it again: its turn counts no more) when a run of its
        session waits for a person's input."""
        pending = await self._inputs.list_requests(
            agent.project_id,
            PageRequest(size=100),
            state=InputRequestState.PENDING,
            now=utc_now(),
            session_id=session_id,
        )
        if not pending.items:
            return
        await self._registry.finish_run(principal, _refused(agent.id, run_id))
        first = pending.items[0]
        raise SessionAwaitsInput(
            session_id, first.run_id, [r.id for r in pending.items if r.run_id == first.run_id]
        )

    async def await_turn(self, agent_id: str, run_id: str, *, wait_seconds: float) -> list[str]:
        """The run ids of the turns still in flight before the run, once there are none or after
        `wait_seconds` (at most MAX_WAIT_SECONDS)."""
        violations = [
            FieldViolation(name, "is required")
            for name, value in (("agent_id", agent_id), ("run_id", run_id))
            if not value
        ]
        if wait_seconds < 0:
            violations.append(FieldViolation("wait_seconds", "must not be negative"))
        if violations:
            raise ValidationFailed.of(violations)
        deadline = time.monotonic() + min(wait_seconds, MAX_WAIT_SECONDS)
        while True:
            ahead = await self._store.turns_ahead((agent_id, run_id))
            if not ahead or time.monotonic() >= deadline:
                return [key[1] for key in ahead]
            await asyncio.sleep(_POLL_SECONDS)


def _refused(agent_id: str, run_id: str) -> FinishedRun:
    """A run refused at its start, finished again so that its turn counts no more: it used
    nothing."""
    return FinishedRun(agent_id=agent_id, run_id=run_id, completed=False, tokens_used=0, cost=0.0)
