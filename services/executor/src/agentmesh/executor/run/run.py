"""One run's life once it is admitted and its agent is ready, top to bottom: started (its input
recorded, its session's turn awaited, `run_started` sent), its steps (the LLM loop or the
workflow), and its end. Every way it ends goes through `Run.end`: answered, failed or cancelled.
A run given up here (handed over, its lease lost, or superseded by its taker) records no end: the
executor that takes it over resumes it from the log.

A run that waits for a human would be one more state between its steps: it gives back its slot
and its lease, and goes on later from the log as a run taken over does (`resumed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.runtime import AgentRuntime, kind_name
from agentmesh.executor.context.events import EventOrigin, EventSink, usage_proto
from agentmesh.executor.context.scope import RunFailure, RunResult, RunScope
from agentmesh.executor.delegation.delegator import Delegator
from agentmesh.executor.delegation.executor_runs import ExecutorRuns
from agentmesh.executor.durability.finisher import RunFinisher
from agentmesh.executor.durability.recorder import EventType, RunSuperseded, end_key
from agentmesh.executor.durability.run_log import RunLog
from agentmesh.executor.errors import MCP_SERVER_UNAVAILABLE, run_failed
from agentmesh.executor.loops.llm import LlmLoop, LlmLoopSettings
from agentmesh.executor.loops.workflow import WorkflowRun, WorkflowSettings
from agentmesh.executor.run.admission import AdmittedRun
from agentmesh.executor.run.end import record_cancelled, record_failure, result_metadata
from agentmesh.executor.run.outliving import Outliving
from agentmesh.executor.run.turns import await_turn
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.errors import DomainError, FieldViolation

logger = logging.getLogger(__name__)

HANDED_OVER = "handed over: the executor is stopping"
LOST = "this executor lost the run's lease"
# Runs stopped here without an end: their taker resumes them from the log.
GIVEN_UP = (HANDED_OVER, LOST)


@dataclass(frozen=True)
class RunServices:
    """What every run of this executor uses, built once in `app.py`."""

    registry: RegistryClient
    memory: MemoryClient
    executor_runs: ExecutorRuns
    delegator: Delegator
    outliving: Outliving
    finisher: RunFinisher
    llm_settings: LlmLoopSettings
    workflow_settings: WorkflowSettings
    executor_id: str
    cleanup_timeout_seconds: float
    history_window_events: int


@dataclass(frozen=True)
class Ending:
    """How a run ends: its answer (`result`, recorded as the event `answer_seq`), a failure (a
    gRPC status name, message and reason), or a cancellation (`cancelled`, with `reason` when it
    was cancelled from here rather than by its caller)."""

    result: RunResult | None = None
    answer_seq: int = 0
    code: str = ""
    message: str = ""
    reason: str | None = None
    metadata: Mapping[str, str] | None = None
    violations: Sequence[FieldViolation] = ()
    cancelled: bool = False

    @classmethod
    def failure(cls, error: Exception) -> Ending:
        if isinstance(error, RunFailure):
            return cls(code=error.code, message=error.message, reason=error.reason)
        if isinstance(error, DomainError):
            return cls(
                code=error.code.name,
                message=error.message,
                reason=error.reason,
                metadata=error.metadata,
                violations=error.violations,
            )
        internal = grpc.StatusCode.INTERNAL.name
        return cls(code=internal, message="internal error", reason=internal)


class Run:
    """One admitted run whose agent is ready: `live` takes it from its start to its end."""

    def __init__(
        self,
        admitted: AdmittedRun,
        runtime: AgentRuntime,
        sink: EventSink,
        *,
        services: RunServices,
        interrupt: Callable[[str], None],
        cancel_reasons: Mapping[asyncio.Task[Any], str],
    ) -> None:
        request, spec = admitted.request, admitted.spec
        self.admitted = admitted
        self.runtime = runtime
        self.kind = kind_name(spec.kind)
        self.origin = EventOrigin(
            admitted.run_id,
            request.session_id,
            spec.agent.slug or spec.agent.name,
            tuple(request.delegation_path),
        )
        self.scope = RunScope(request, spec, self.origin, admitted.recorder, sink)
        self._sink = sink
        self._services = services
        self._interrupt = interrupt
        self._cancel_reasons = cancel_reasons

    async def live(self, resumed: RunLog | None = None) -> RunResult | None:
        """The run from its start to its end: the answer, or None when it failed (and said so).
        The stream ends with the answer (or the failure); the run's bookkeeping goes on after."""
        try:
            received = await self._start()
            result = await self._steps(received, resumed)
            answer = await self._record_answer(received, result)
        except RunSuperseded:
            raise  # not this executor's run any more: no end here
        except asyncio.CancelledError:
            reason = self._cancel_reasons.get(asyncio.current_task())  # type: ignore[arg-type]
            if reason in GIVEN_UP or self.admitted.recorder.superseded is not None:
                raise  # no end: the executor that takes it over resumes it
            await self.end(Ending(cancelled=True, reason=reason))
            raise
        except Exception as error:
            if not isinstance(error, (RunFailure, DomainError)):
                logger.exception("run %s of %s failed", self.origin.run_id, self.admitted.spec.agent.name)
            return await self.end(Ending.failure(error))
        return await self.end(Ending(result=result, answer_seq=answer.seq))

    async def _start(self) -> memory_pb2.Event:
        """The input first: its seq tells whether the session had events before this run (a new
        session has no history, and is not asked for it: memory answers NOT_FOUND). Then its
        session's turn, and only then `run_started`: a client that saw the run start finds it in
        the log, so it can resume the stream from there whatever dies next (recorded early, this
        waits little). The input's event."""
        admitted, runtime, request = self.admitted, self.runtime, self.admitted.request
        admitted.loop_started = True
        started = self.origin.event(
            run_started=run_pb2.RunStarted(
                agent_kind=self.kind,
                model=runtime.models.plan.name if runtime.models else "",
                executor_id=self._services.executor_id,
                may_act=self.kind == "llm" and runtime.may_act(as_sub_agent=request.as_sub_agent),
            )
        )
        received = await admitted.record_input()
        self.scope.input_event_id = received.id
        await await_turn(
            self._services.registry,
            admitted.spec.agent.id,
            admitted.run_id,
            policy=admitted.double_texting,
            runs_ahead=admitted.runs_ahead,
            interrupt=self._interrupt,
            metadata=self._services.executor_runs.system_metadata(),
        )
        await self._sink.emit(started)
        for server in runtime.unavailable_servers:
            await self.scope.error(
                MCP_SERVER_UNAVAILABLE,
                f"MCP server {server.name!r} is unavailable, so the run goes on without its tools: "
                f"{server.reason}",
                metadata={"server": server.name},
            )
        return received

    async def _steps(self, received: memory_pb2.Event, resumed: RunLog | None) -> RunResult:
        """The agent's loop: an LLM agent's steps over its context window, or a workflow's
        sub-agents. A resumed run goes on from where its log stops."""
        services = self._services
        if self.kind == "llm":
            history = await self.admitted.history(
                services.memory, received, window=services.history_window_events
            )
            loop = LlmLoop(
                self.scope, self.runtime, settings=services.llm_settings, delegator=services.delegator
            )
            return await loop.run(history, resumed)
        spec = self.admitted.spec
        return await WorkflowRun(
            self.scope,
            executor_runs=services.executor_runs,
            settings=services.workflow_settings,
            log=services.outliving.log(self.admitted.request.session_id, spec.agent.project_id),
            sub_agent_runs=resumed.sub_agent_runs if resumed else None,
        ).run()

    async def _record_answer(self, received: memory_pb2.Event, result: RunResult) -> memory_pb2.Event:
        """The answer's event, under the run's one end key."""
        return await self.admitted.recorder.record(
            EventType.EVENT_TYPE_AGENT_RESPONSE,
            result.content,
            parent_event_id=received.id,
            metadata=result_metadata(result),
            idempotency_key=end_key(self.origin.run_id),
        )

    async def end(self, ending: Ending) -> RunResult | None:
        """Every way the run ends: its answer streamed (already recorded), or its failure or
        cancellation recorded and streamed — each after its session's turn is released. The
        answer, or None."""
        cleanup = self._services.cleanup_timeout_seconds
        if ending.cancelled:
            await record_cancelled(self.scope, ending.reason, cleanup_timeout_seconds=cleanup)
            if ending.reason:
                await self._release_turn(None)
                # Cancelled from here (the agent was terminated), not by the caller: it still
                # listens, and learns why.
                cancelled = grpc.StatusCode.CANCELLED.name
                message = f"the run was cancelled: {ending.reason}"
                self._sink.emit_last(self.origin.event(run_failed=run_failed(cancelled, message, cancelled)))
            return None
        if ending.result is None:
            await record_failure(
                self.scope,
                ending.code,
                ending.message,
                ending.reason or "",
                metadata=ending.metadata,
                violations=ending.violations,
                cleanup_timeout_seconds=cleanup,
                before_end=lambda: self._release_turn(None),
            )
            return None
        result = ending.result
        await self._release_turn(result)
        await self._sink.emit(
            self.origin.event(
                seq=ending.answer_seq,
                run_completed=run_pb2.RunCompleted(
                    content=result.content,
                    usage=usage_proto(result.total_usage),
                    max_steps_reached=result.max_steps_reached,
                    steps=result.steps,
                    escalated=result.escalated,
                ),
            )
        )
        self._sink.close()
        return result

    async def _release_turn(self, result: RunResult | None) -> None:
        """A run that is its session's turn reports its end before its caller sees the end, so
        that the caller's next message finds the session free (the finisher sends it without its
        batch window). The wait is bounded: a registry that does not answer delays the caller's
        last event by at most the cleanup timeout, and the turn is released once the end is
        delivered. Other runs' ends are reported after their stream ended (`RunExecutor`)."""
        if not self.admitted.double_texting:
            return
        taken = self.admitted.report_end(self._services.finisher, result, urgent=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(taken), self._services.cleanup_timeout_seconds)
