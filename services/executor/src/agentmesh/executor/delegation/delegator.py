"""Delegation: an LLM agent hands a task to another agent — of its project, as a run on the
executor pool (`executor_runs.py`), or a remote A2A agent its network names. The run below carries
the session, a delegation id, the depth, and (through the shared client interceptor) the caller's
token, remaining deadline and trace context, and the caller's run id: a caller that is cancelled
records the delegation's response, which cancels the run on the other side; a caller whose
stream merely broke (its executor died or handed it over) leaves the run going to its own end,
which the resumed caller reads from the log. Every request that is recorded gets exactly one
response (docs/durability.md, "Exactly one end").
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.events import EventOrigin
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.delegation.bounds import TreeBounds
from agentmesh.executor.delegation.executor_runs import ExecutorRuns, child_request, follow
from agentmesh.executor.delegation.outcome import (
    ChildOutcome,
    DelegationResult,
    Outcome,
    delegation_result,
    metric_outcome,
    outcome_name,
)
from agentmesh.executor.durability.child_log import REMOTE_TASK_ACCEPTED, ChildLog, remote_task_key
from agentmesh.executor.durability.detached import known, run_detached
from agentmesh.executor.durability.recorder import EventType, NewEvent, request_key, response_key
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.runtime import metrics, telemetry

logger = logging.getLogger(__name__)


@dataclass
class PreparedDelegation:
    """A delegation planned before it is sent (`Delegator.prepare`)."""

    target: str  # the agent's slug
    task: str
    delegation_id: str
    refused: tuple[str, str] | None  # (reason, message) when it may not be sent
    request: NewEvent | None  # its delegation_request event, when it may be sent
    # The append that records `request` with the step's other intent events, when the caller
    # records it (detached from the run's cancellation, as `delegate` would).
    recording: asyncio.Future[memory_pb2.Event] | None = None


class Delegator:
    """Hands a task to another agent of the same project, within the caller's network access and
    the bounds on the tree under the chat: depth, re-entry into the delegation path, delegations
    per model step and per chat. Every delegation that is sent gets exactly one
    `delegation_response`; one that may not be sent gets an `error` event instead, and the
    caller's loop goes on."""

    def __init__(
        self,
        executor_runs: ExecutorRuns,
        *,
        max_depth: int,
        max_per_step: int = 4,
        max_per_chat: int = 50,
        timeout_seconds: float,
        cleanup_timeout_seconds: float,
        memory: MemoryClient | None = None,
        handing_over: Callable[[], bool] = lambda: False,
    ) -> None:
        self._runs_on_pool = executor_runs
        self._memory = memory  # where a resumed run finds its open delegations' runs (`resume`)
        # True while the executor hands its runs over (runner.hand_over): an open delegation is
        # then left without a response, for the resumed run to answer from its delegated run.
        self._handing_over = handing_over
        self._bounds = TreeBounds(
            max_depth=max_depth, max_per_step=max_per_step, max_per_chat=max_per_chat, memory=memory
        )
        self._timeout_seconds = timeout_seconds
        self._cleanup_timeout_seconds = cleanup_timeout_seconds

    async def prepare_step(
        self, scope: RunScope, wanted: Sequence[tuple[str, str, dict[str, Any]]]
    ) -> list[PreparedDelegation]:
        """The delegations one model step asks for — (target, task, intent) each — planned as
        `prepare` plans them, in order, and within the tree's bounds (bounds.py)."""
        prepared = [self.prepare(scope, target, task, intent=intent) for target, task, intent in wanted]
        sendable = [delegation for delegation in prepared if delegation.refused is None]
        if sendable:
            for delegation in await self._bounds.limit_step(scope, sendable):
                delegation.request = None
        return prepared

    def prepare(
        self, scope: RunScope, target: str, task: str, *, intent: dict[str, Any] | None = None
    ) -> PreparedDelegation:
        """A delegation of `task` to the agent `target` names (by its slug or its exact name),
        planned before it is sent: its id, why it may not be sent (`refused`), and else its
        `delegation_request` event, which the caller may record together with the step's other
        intent events (then handing `delegate` the append's future as `recording`). `intent`:
        what the request's event records of the model's call besides (run_log.PlannedCall.intent)."""
        target = target_slug(scope, target)
        delegation_id = uuid.uuid4().hex
        refused = self._bounds.refusal(scope, target)
        request = None
        if refused is None:
            request = NewEvent(
                EventType.EVENT_TYPE_DELEGATION_REQUEST,
                {"agent": target, "task": task},
                metadata={**(intent or {}), "target_agent": target, "depth": scope.depth + 1},
                parent_event_id=scope.input_event_id,
                delegation_id=delegation_id,
                idempotency_key=request_key(delegation_id),
            )
        return PreparedDelegation(target, task, delegation_id, refused, request)

    async def delegate(
        self,
        scope: RunScope,
        target: str,
        task: str,
        *,
        intent: dict[str, Any] | None = None,
        prepared: PreparedDelegation | None = None,
    ) -> DelegationResult:
        """Delegates `task` to the agent `target` names, by its slug or its exact name. `intent`:
        what the request's event records of the model's call besides (run_log.PlannedCall.intent).
        `prepared`: the delegation as `prepare` planned it, its request being recorded by the
        caller when its `recording` is set (else recorded here)."""
        prepared = prepared or self.prepare(scope, target, task, intent=intent)
        target, delegation_id = prepared.target, prepared.delegation_id
        started = time.monotonic()
        with telemetry.delegation_span(
            target=target, delegation_id=delegation_id, depth=scope.depth + 1
        ) as span:
            if prepared.refused is not None:
                reason, message = prepared.refused
                span.set_attribute(telemetry.DELEGATION_OUTCOME, "refused")
                metrics.record_delegation(
                    outcome="refused", depth=scope.depth + 1, seconds=time.monotonic() - started
                )
                await scope.error(reason, message, metadata={"target_agent": target, "task": task})
                return DelegationResult(Outcome.DELEGATION_OUTCOME_REFUSED, message)
            # The request is recorded detached from this run's cancellation, so that once it is
            # stored the response below is recorded too, whenever the cancel comes: exactly one
            # response per request (a cancel while the append is in flight waits for it).
            recording = prepared.recording or self._record_request(scope, prepared)
            request_event: memory_pb2.Event | None = None
            unrecorded: Exception | None = None  # why the request's append failed
            child = ChildOutcome(code="CANCELLED", message="the delegating run was cancelled")
            try:
                try:
                    request_event = await asyncio.shield(recording)
                except Exception as error:
                    # Not sent. Stored all the same (the append's answer came too late), it is
                    # answered below: `_settled` finds out.
                    unrecorded = error
                    child = ChildOutcome(
                        code="UNAVAILABLE", message="its request could not be recorded, so it was not sent"
                    )
                    request_event = await self._settled(scope, prepared, recording)
                if request_event is not None:
                    await scope.sink.emit(
                        scope.origin.event(
                            seq=request_event.seq,
                            delegation_request=run_pb2.DelegationRequest(
                                delegation_id=delegation_id, target_agent=target, task=task
                            ),
                        )
                    )
                if unrecorded is None:
                    child = await self._run(scope, target, task, delegation_id, request_event)
            finally:
                if request_event is None and unrecorded is None:
                    request_event = await self._settled(scope, prepared, recording)
                result = delegation_result(target, child)
                span.set_attribute(telemetry.DELEGATION_OUTCOME, outcome_name(result.outcome))
                metrics.record_delegation(
                    outcome=metric_outcome(result.outcome),
                    depth=scope.depth + 1,
                    seconds=time.monotonic() - started,
                )
                seq = 0
                if request_event is not None and not self._handing_over() and not result.open:
                    seq = await self._respond(scope, target, delegation_id, request_event.id, result)
            if (request_event is not None or unrecorded is None) and not result.open:
                await _emit_response(scope, target, delegation_id, result, seq)
            if unrecorded is not None:
                raise unrecorded
            return result

    def _record_request(
        self, scope: RunScope, prepared: PreparedDelegation
    ) -> asyncio.Future[memory_pb2.Event]:
        """Records the delegation's request, detached (`delegate`)."""

        async def record() -> memory_pb2.Event:
            assert prepared.request is not None, "a delegation that may be sent has its request"
            (event,) = await scope.recorder.record_many([prepared.request])
            return event

        return asyncio.ensure_future(run_detached(record, timeout_seconds=self._cleanup_timeout_seconds))

    async def _settled(
        self, scope: RunScope, prepared: PreparedDelegation, recording: asyncio.Future[memory_pb2.Event]
    ) -> memory_pb2.Event | None:
        """The delegation request's event once its append settled; None when it surely was not
        stored. An append whose outcome is unknown (it ran out of time, or memory was away or
        slow: it may be stored all the same) is sent again under the request's own key until
        memory answers (with the stored event, or storing it now), so that a request in the log
        always gets its response. A run taken over is answered by its taker."""
        return await known(
            recording,
            lambda: self._record_request(scope, prepared),
            what=f"delegation {prepared.delegation_id}'s request",
            stop_asking=self._handing_over,
        )

    async def resume(
        self, scope: RunScope, target: str, task: str, request_event: memory_pb2.Event
    ) -> DelegationResult:
        """Answers a delegation a resumed run recorded with no response (its executor died with
        it open): from the delegated run's one final event in the log, waited for — that run is
        resumed by whoever takes it over, or goes on where it runs (it outlives its caller) — or,
        when no run ever received it, by sending it now under the same `delegation_id`. A remote
        A2A agent's task is followed instead, or is in doubt (`_resume_remote`). Records the one
        response."""
        delegation_id = request_event.delegation_id
        log = self._log(scope)
        remote = self._is_remote(scope, target)
        child_run = await log.child_run(delegation_id) if log is not None and not remote else ""
        if remote:
            assert log is not None, "a resumed run's delegator reads the log"
            child = await self._resume_remote(scope, target, log, delegation_id)
        elif log is not None and child_run:
            child = await follow(log, child_run, self._timeout_seconds)
        else:
            child = await self._run(scope, target, task, delegation_id, request_event)
        return await self._close(
            scope, target, request_event, delegation_result(target, child), in_doubt=child.in_doubt
        )

    async def answer_remote(
        self, scope: RunScope, target: str, request_event: memory_pb2.Event, answer: str, *, ended: str = ""
    ) -> DelegationResult:
        """Goes on with an open delegation whose remote A2A task stopped to ask a question: the
        person's `answer` is the next message on that task, which is followed to its end — or to
        its next question (the delegation stays open again). `ended`: nobody answered (why: a
        denial, or the request expired) — the task is cancelled (best effort) and the delegation
        ends without an answer. Records the one response when it ends."""
        assert self._runs_on_pool.a2a is not None, "a remote delegation runs over A2A"
        delegation_id = request_event.delegation_id
        log = self._log(scope)
        task_id = await log.remote_task(delegation_id) if log is not None else ""
        origin = _a2a_origin(scope, target, delegation_id)
        project_id = scope.spec.agent.project_id
        if not task_id:
            text = f"the delegation to {target} ended without an answer: its remote task is not recorded"
            return await self._close(
                scope, target, request_event, DelegationResult(Outcome.DELEGATION_OUTCOME_FAILED, text)
            )
        if ended:
            await self._runs_on_pool.a2a.cancel(
                project_id=project_id, name=target, task_id=task_id, origin=origin
            )
            text = f"the delegation to {target} ended without an answer to its question: {ended}"
            return await self._close(
                scope, target, request_event, DelegationResult(Outcome.DELEGATION_OUTCOME_CANCELLED, text)
            )
        child = await self._runs_on_pool.a2a.answer(
            project_id=project_id,
            name=target,
            task_id=task_id,
            answer=answer,
            origin=origin,
            sink=scope.sink,
            timeout_seconds=self._timeout_seconds,
        )
        return await self._close(scope, target, request_event, delegation_result(target, child))

    async def _close(
        self,
        scope: RunScope,
        target: str,
        request_event: memory_pb2.Event,
        result: DelegationResult,
        *,
        in_doubt: bool = False,
    ) -> DelegationResult:
        """Records and streams the one response of a delegation that ended; one that waits for a
        person stays open (no response)."""
        if result.open:
            return result
        delegation_id = request_event.delegation_id
        seq = await self._respond(scope, target, delegation_id, request_event.id, result, in_doubt=in_doubt)
        await _emit_response(scope, target, delegation_id, result, seq)
        return result

    async def received(self, scope: RunScope, target: str, delegation_id: str) -> bool:
        """Whether a run received the delegation (a remote A2A agent's is taken as received: it
        may have the task, and a send is not repeated)."""
        log = self._log(scope)
        if log is None or self._is_remote(scope, target):
            return True
        return bool(await log.child_run(delegation_id))

    async def refuse(
        self, scope: RunScope, target: str, request_event: memory_pb2.Event, text: str
    ) -> DelegationResult:
        """Answers a recorded delegation that is not to be sent (a person denied it, or nobody
        approved it in time): its one response, refused, saying why."""
        return await self._close(
            scope, target, request_event, DelegationResult(Outcome.DELEGATION_OUTCOME_REFUSED, text)
        )

    def _is_remote(self, scope: RunScope, target: str) -> bool:
        """A remote A2A agent the network names (one that is not an agent of the project)."""
        return target not in scope.spec.agent_names and self._runs_on_pool.a2a is not None

    async def _resume_remote(
        self, scope: RunScope, target: str, log: ChildLog, delegation_id: str
    ) -> ChildOutcome:
        """An open delegation to a remote A2A agent: the task the remote made of it, followed to
        its end, when its id was recorded; else the send is in doubt — the remote may or may not
        have the task, and A2A has no idempotent send — so it is not sent again, and the model is
        told the outcome is unknown (as for a non-idempotent tool call)."""
        assert self._runs_on_pool.a2a is not None
        task_id = await log.remote_task(delegation_id)
        if not task_id:
            return ChildOutcome(
                code="UNKNOWN",
                in_doubt=True,
                message="the outcome is unknown: this run's executor stopped while sending the task, "
                f"before {target} named the task it made of it; it was not sent again (it may have "
                "reached the remote agent)",
            )
        return await self._runs_on_pool.a2a.follow(
            project_id=scope.spec.agent.project_id,
            name=target,
            task_id=task_id,
            origin=_a2a_origin(scope, target, delegation_id),
            sink=scope.sink,
            timeout_seconds=self._timeout_seconds,
        )

    async def _run(
        self,
        scope: RunScope,
        target: str,
        task: str,
        delegation_id: str,
        request_event: memory_pb2.Event,
    ) -> ChildOutcome:
        """The delegated run: on an executor of the pool for an agent of the project, over A2A
        for a remote agent the network names (one that is not an agent of the project)."""
        if self._is_remote(scope, target):
            assert self._runs_on_pool.a2a is not None

            async def accepted(task_id: str, context_id: str) -> None:
                await _note_remote_task(scope, target, delegation_id, request_event.id, task_id, context_id)

            return await self._runs_on_pool.a2a.run(
                project_id=scope.spec.agent.project_id,
                name=target,
                task=task,
                origin=_a2a_origin(scope, target, delegation_id),
                sink=scope.sink,
                timeout_seconds=self._timeout_seconds,
                on_task=accepted,
            )
        return await self._runs_on_pool.run(
            child_request(scope, target, task, delegation_id=delegation_id, parent_event_id=request_event.id),
            scope.sink,
            timeout_seconds=self._timeout_seconds,
            log=self._log(scope),
        )

    def _log(self, scope: RunScope) -> ChildLog | None:
        """Where this run's delegated runs are followed when their stream breaks."""
        if self._memory is None:
            return None
        return ChildLog(
            self._memory,
            session_id=scope.session_id,
            project_id=scope.spec.agent.project_id,
            metadata=self._runs_on_pool.system_metadata(),
        )

    async def _respond(
        self,
        scope: RunScope,
        target: str,
        delegation_id: str,
        request_event_id: str,
        result: DelegationResult,
        *,
        in_doubt: bool = False,
    ) -> int:
        outcome = outcome_name(result.outcome)
        marks = {"in_doubt": True} if in_doubt else {}
        try:
            event = await scope.recorder.record_end(
                EventType.EVENT_TYPE_DELEGATION_RESPONSE,
                {"agent": target, "outcome": outcome, "content": result.text},
                parent_event_id=request_event_id,
                delegation_id=delegation_id,
                metadata={"target_agent": target, "outcome": outcome, **marks},
                idempotency_key=response_key(delegation_id),
                timeout_seconds=self._cleanup_timeout_seconds,
            )
        except Exception:
            logger.exception("could not record the response of delegation %s", delegation_id)
            return 0
        # None: kept in the outbox, or answered first by the executor that took the run over.
        return event.seq if event else 0


def _a2a_origin(scope: RunScope, target: str, delegation_id: str) -> EventOrigin:
    """Where a remote A2A task's steps stream: as a worker's, below the delegating agent."""
    return EventOrigin(
        run_id=f"a2a-{delegation_id}",
        session_id=scope.session_id,
        agent=target,
        delegation_path=scope.origin.child_path,
    )


async def _note_remote_task(
    scope: RunScope, target: str, delegation_id: str, request_event_id: str, task_id: str, context_id: str
) -> None:
    """Records which remote task the delegation became (child_log.REMOTE_TASK_ACCEPTED), for a
    resumed run to follow. Not recorded (memory away): a resumed run finds the send in doubt."""
    try:
        await scope.recorder.record(
            EventType.EVENT_TYPE_ERROR,
            f"{target} accepted the delegation as its task {task_id}",
            metadata={
                "reason": REMOTE_TASK_ACCEPTED,
                "target_agent": target,
                "remote_task_id": task_id,
                "remote_context_id": context_id,
            },
            parent_event_id=request_event_id,
            delegation_id=delegation_id,
            idempotency_key=remote_task_key(delegation_id),
        )
    except Exception:
        logger.warning("could not record the remote task of delegation %s", delegation_id, exc_info=True)


async def _emit_response(
    scope: RunScope, target: str, delegation_id: str, result: DelegationResult, seq: int
) -> None:
    await scope.sink.emit(
        scope.origin.event(
            seq=seq,
            delegation_response=run_pb2.DelegationResponse(
                delegation_id=delegation_id, target_agent=target, outcome=result.outcome, content=result.text
            ),
        )
    )


def target_slug(scope: RunScope, target: str) -> str:
    """The slug of the agent a delegation names: a model may write an agent of the network by its
    slug or by its exact name (the registry resolved which agents those are, `agent_names`)."""
    if target in scope.spec.network_access:
        return target
    return next((slug for slug, name in scope.spec.agent_names.items() if name == target), target)
