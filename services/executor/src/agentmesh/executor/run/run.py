"""One run's life, top to bottom, in one object (`Run`):

- admitted: admission.py makes the `Run` once the registry started it — its request, its agent's
  spec, its recorder, its session's turn policy and the runs ahead of it (its input is recorded
  once it is started, so an input in the log always has a lease);
- live: it gets its agent's runtime (set up, or cached) and the sink its caller's stream drains;
- started: its input recorded, its session's turn awaited, `run_started` sent;
- its steps: the LLM loop or the workflow, which see it through its `RunScope`;
- ended: every way it ends goes through `Run.end` — answered, failed or cancelled once its loop
  began; refused (by the registry, an agent that cannot be set up, memory refusing its input) or
  cancelled before then, leaving with the gRPC status (a resumed run's input in the log gets its
  end first). `Run.end` is the one place that reports ends to the registry (the finisher).

A run given up here (handed over, its lease lost, superseded) records no end: its taker resumes it.

A run that waits for a person (loops/asking.py) is suspended between its steps: its requests are
recorded, it gives back its lease (`_suspend`: parked at the registry) and its slot (its task
ends), keeps its session's turn, and its stream ends with `run_suspended`; no end is recorded or
reported. It goes on later from the log as a taken-over run does (`resumed`), wherever it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.runtime import AgentRuntime, kind_name
from agentmesh.executor.context.events import EventOrigin, EventSink, usage_proto
from agentmesh.executor.context.scope import RunFailure, RunResult, RunScope, UsageMeter
from agentmesh.executor.delegation.delegator import Delegator
from agentmesh.executor.delegation.executor_runs import ExecutorRuns
from agentmesh.executor.durability.detached import run_detached
from agentmesh.executor.durability.finisher import RunFinisher
from agentmesh.executor.durability.recorder import EventType, Recorder, RunSuperseded, end_key
from agentmesh.executor.durability.run_log import RunLog
from agentmesh.executor.errors import MCP_SERVER_UNAVAILABLE, run_failed
from agentmesh.executor.loops.asking import RunSuspends
from agentmesh.executor.loops.llm import LlmLoop, LlmLoopSettings
from agentmesh.executor.loops.workflow import WorkflowRun, WorkflowSettings
from agentmesh.executor.providers.base import Message
from agentmesh.executor.run import answer_format, history
from agentmesh.executor.run.compaction import BudgetedContext, budgeted_history
from agentmesh.executor.run.end import (
    Ending,
    record_cancelled,
    record_early_end,
    record_failure,
    result_metadata,
)
from agentmesh.executor.run.input_event import InputRefused, record_input
from agentmesh.executor.run.outliving import Outliving
from agentmesh.executor.run.turns import await_turn
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1.registry_internal_service_pb2 import ModelUsage
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import current_principal

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
    context_budget_tokens: int = 0  # the prompt's budget of agents whose type sets none (0: the window)


class Run:
    """One run on this executor from its admission to its end (see the module's docstring): what
    it was asked and by whom, its agent, how it records, and where it is in its life. Its loop and
    the runs it delegates see it through its `scope`, made when its loop begins."""

    def __init__(
        self,
        request: executor_service_pb2.RunRequest,
        spec: resources_pb2.AgentSpec,
        recorder: Recorder,
        *,
        services: RunServices,
        double_texting: str = "",
        history_window: int = 0,
        received: memory_pb2.Event | None = None,
    ) -> None:
        self.request = request
        self.spec = spec  # the agent's current spec (admission may resolve it again)
        self.recorder = recorder
        self._services = services
        # A user's message is its session's next turn under this double-texting policy ("" for a
        # delegated or sub-agent run), behind these runs still in flight (turns.py).
        self.double_texting = double_texting
        self.runs_ahead: tuple[str, ...] = ()
        # A delegated LLM run records its input and reads its history window (this many events)
        # in one call (history.py); `_listed_history` is that page once the input is recorded.
        self._history_window = history_window
        self._listed_history: memory_service_pb2.ListEventsResponse | None = None
        # The input's event when it is in the log before the run goes live (a resumed run's).
        self._early_input: asyncio.Future[memory_pb2.Event] | None = None
        if received is not None:
            self._early_input = asyncio.get_running_loop().create_future()
            self._early_input.set_result(received)
        self._input_requested = False
        # Given when it goes live (`live`): why its task was cancelled, by the runner.
        self._cancel_reasons: Mapping[asyncio.Task[Any], str] = {}
        self.scope: RunScope | None = None  # made when its loop begins
        self.suspended = False  # it waits for a person's input: no end here
        self._release_lease: Callable[[], None] = lambda: None
        self._ended = False
        self._end_reported = False  # handed to the finisher (once)

    @property
    def run_id(self) -> str:
        return self.recorder.run_id

    @property
    def input_requested(self) -> bool:
        """Whether the input's append was sent (or may have been): from then on the run may be
        in the log, where whoever takes it over finds it."""
        return self._early_input is not None or self._input_requested

    # -- admitted → live ----------------------------------------------------------------------

    async def live(
        self,
        runtime: AbstractAsyncContextManager[AgentRuntime],
        sink: EventSink,
        *,
        resumed: RunLog | None = None,
        interrupt: Callable[[str], None],
        cancel_reasons: Mapping[asyncio.Task[Any], str],
        release_lease: Callable[[], None],
    ) -> RunResult | None:
        """The run from its agent's set-up (`runtime`) to its end: the answer, or None when it
        failed (and said so) or suspended (`suspended`). The stream ends with the answer (or the
        failure, or the suspension); the run's bookkeeping goes on after. An agent that cannot be
        set up refuses the run, which leaves with the status. `cancel_reasons`: why its task was
        cancelled (from here, not by its caller); `interrupt` stops a run of its session ahead of
        it; `release_lease` stops this executor renewing the run's lease (it suspends)."""
        self._cancel_reasons = cancel_reasons
        self._release_lease = release_lease
        async with self.ends_on_error(), runtime as agent:
            return await self._loop(agent, sink, resumed, interrupt)

    @contextlib.asynccontextmanager
    async def ends_on_error(self, *, registry_refuses: bool = False) -> AsyncIterator[None]:
        """Ends the run when the block raises before its loop began (its start at the registry,
        its agent's set-up): cancelled, or refused. `registry_refuses`: an error is the
        registry's refusal to start it. Not a run given up here; nor one whose loop began, which
        ends it (`_loop`)."""
        try:
            yield
        except (RunSuperseded, asyncio.CancelledError):
            if self.scope is None and not self._given_up():
                await self.end(Ending(cancelled=True))
            raise
        except Exception as error:
            if self.scope is None:
                await self.end(Ending.failure(error, registry_started=not registry_refuses))
            raise

    async def _loop(
        self, runtime: AgentRuntime, sink: EventSink, resumed: RunLog | None, interrupt: Callable[[str], None]
    ) -> RunResult | None:
        """Started, its steps, its answer; and its end, whatever happens."""
        request, spec = self.request, self.spec
        origin = EventOrigin(
            self.run_id,
            request.session_id,
            spec.agent.slug or spec.agent.name,
            tuple(request.delegation_path),
        )
        self.scope = scope = RunScope(request, spec, origin, self.recorder, sink)
        try:
            received = await self._start(scope, runtime, interrupt)
            result = await self._steps(scope, runtime, received, resumed)
            answer = await self._record_answer(received, result)
        except RunSuperseded:
            raise  # not this executor's run any more: no end here
        except RunSuspends as suspension:
            await self._suspend(scope, suspension)
            return None
        except asyncio.CancelledError:
            if self._given_up():
                raise  # no end: the executor that takes it over resumes it
            await self.end(Ending(cancelled=True, reason=self._cancel_reason()))
            raise
        except InputRefused as refused:  # nothing of it stored: it ends refused (`ends_on_error`)
            self.scope = None
            raise refused.error from None
        except Exception as error:
            if not isinstance(error, (RunFailure, DomainError)):
                logger.exception("run %s of %s failed", self.run_id, spec.agent.name)
            return await self.end(Ending.failure(error))
        return await self.end(Ending(result=result, answer_seq=answer.seq))

    # -- started ------------------------------------------------------------------------------

    async def _start(
        self, scope: RunScope, runtime: AgentRuntime, interrupt: Callable[[str], None]
    ) -> memory_pb2.Event:
        """The input first: its seq tells whether the session had events before this run (a new
        session has no history, and is not asked for it: memory answers NOT_FOUND). Then its turn,
        and only then `run_started`: a client that saw the run start finds it in the log, so it
        resumes the stream from there whatever dies next. The input's event."""
        request, kind = self.request, kind_name(self.spec.kind)
        acts = bool(request.client_tools) or runtime.may_act(as_sub_agent=request.as_sub_agent)
        started = scope.origin.event(
            run_started=run_pb2.RunStarted(
                agent_kind=kind,
                model=runtime.models.plan.name if runtime.models else "",
                executor_id=self._services.executor_id,
                may_act=kind == "llm" and acts,
            )
        )
        self._input_requested = True
        received = await (self._early_input or self._record_input())
        scope.input_event_id = received.id
        scope.input_seq = received.seq
        await await_turn(
            self._services.registry,
            self.spec.agent.id,
            self.run_id,
            policy=self.double_texting,
            runs_ahead=self.runs_ahead,
            interrupt=interrupt,
            metadata=self._services.executor_runs.system_metadata(),
        )
        await scope.sink.emit(started)
        for server in runtime.unavailable_servers:
            await scope.error(
                MCP_SERVER_UNAVAILABLE,
                f"MCP server {server.name!r} is unavailable, so the run goes on without its tools: "
                f"{server.reason}",
                metadata={"server": server.name},
            )
        return received

    async def _record_input(self) -> memory_pb2.Event:
        event, self._listed_history = await record_input(
            self.request, self.recorder, history_window=self._history_window
        )
        return event

    # -- its steps ----------------------------------------------------------------------------

    async def _steps(
        self, scope: RunScope, runtime: AgentRuntime, received: memory_pb2.Event, resumed: RunLog | None
    ) -> RunResult:
        """The agent's loop: an LLM agent's steps over its context window, or a workflow's
        sub-agents. A resumed run goes on from where its log stops."""
        services = self._services
        if kind_name(self.spec.kind) == "llm":
            loop = LlmLoop(scope, runtime, settings=services.llm_settings, delegator=services.delegator)
            answered = await loop.run(await self._history(received, runtime), resumed)
            if not answered.max_steps_reached:
                answer_format.check(self.request.response_format, answered.content)
            return answered
        return await WorkflowRun(
            scope,
            executor_runs=services.executor_runs,
            settings=services.workflow_settings,
            log=services.outliving.log(self.request.session_id, self.spec.agent.project_id),
            sub_agent_runs=resumed.sub_agent_runs if resumed else None,
        ).run()

    async def _history(self, received: memory_pb2.Event, runtime: AgentRuntime) -> list[Message]:
        """The request's own context (history.request_context), then the agent's history: within
        its token budget when it has one (compaction.py), else its window (history.py) — read with
        the input for a delegated run, not at all for a new session's first message."""
        sent = history.request_context(
            self.request,
            function_calling=runtime.function_calling,
            native_tool_choice=runtime.native_tool_choice,
        )
        budget = self.spec.context_budget_tokens or self._services.context_budget_tokens
        if budget and received.seq > 1 and runtime.models is not None:
            system = runtime.system_prompt(as_sub_agent=self.request.as_sub_agent)
            fixed = [system, self.request.input, *(message.content for message in sent)]
            context = BudgetedContext.of(self.recorder, self.run_id, budget, fixed, self.spec)
            summarizer = runtime.models.for_compaction()
            return sent + await budgeted_history(self._services.memory, self.recorder, summarizer, context)
        window = self._services.history_window_events
        if self._listed_history is not None:
            return sent + history.messages(self._listed_history, window=window, exclude_run_id=self.run_id)
        if received.seq <= 1:
            return sent
        return sent + await history.read_history(
            self._services.memory,
            session_id=self.recorder.session_id,
            project_id=self.recorder.project_id,
            agent=self.recorder.agent,
            window=window,
            exclude_run_id=self.run_id,
        )

    async def _record_answer(self, received: memory_pb2.Event, result: RunResult) -> memory_pb2.Event:
        """The answer's event, under the run's one end key."""
        return await self.recorder.record(
            EventType.EVENT_TYPE_AGENT_RESPONSE,
            result.content,
            parent_event_id=received.id,
            metadata=result_metadata(result),
            idempotency_key=end_key(self.run_id),
        )

    # -- suspended ----------------------------------------------------------------------------

    async def _suspend(self, scope: RunScope, suspension: RunSuspends) -> None:
        """Parks the run at the registry with its requests (recorded already) and ends its
        stream with `run_suspended`. Its lease is given back first: should the registry not take
        the run, the lease expires and whoever takes the run over finds the requests in the log
        and suspends it again. Its session's turn stays taken; no end is recorded or reported."""
        self.suspended = True
        self._release_lease()
        try:
            await self._services.registry.suspend_run(
                self.spec.agent.id,
                self.run_id,
                executor_id=self._services.executor_id,
                requests=suspension.requests,
                waits_on=[waiting.run_id for waiting in suspension.below],
                metadata=self._services.executor_runs.system_metadata(),
            )
        except DomainError as error:
            logger.warning(
                "run %s could not be parked at the registry (%s): it is suspended again once its "
                "lease expires",
                self.run_id,
                error,
            )
        await scope.sink.emit(
            scope.origin.event(run_suspended=run_pb2.RunSuspended(request_ids=suspension.request_ids))
        )
        scope.sink.close()

    # -- ended --------------------------------------------------------------------------------

    async def end(self, ending: Ending) -> RunResult | None:
        """Every way the run ends, once: recorded (and, once its loop began, streamed), then
        reported to the registry — unless the registry refused to start it, or the run was given
        up here meanwhile. The answer, or None."""
        if self._ended:
            return None
        self._ended = True
        try:
            if self.scope is None:
                await self._end_before_loop(ending)
                return None
            return await self._end_loop(self.scope, ending)
        finally:
            if ending.registry_started and not self._end_reported and not self._given_up():
                self._report_end(ending.result, cancelled=ending.cancelled)

    async def _end_before_loop(self, ending: Ending) -> None:
        """A run refused or cancelled before its loop began leaves with the gRPC status; a resumed
        run, whose input is in the log already, gets its end first (the cancellation detached from
        the cancellation, as every end is). An unexpected error records nothing."""
        if ending.unexpected:
            if self._early_input is not None:
                self._early_input.cancel()  # the run goes no further
            return
        if self._early_input is None:
            return
        early_input, cleanup = self._early_input, self._services.cleanup_timeout_seconds
        if ending.cancelled:
            await run_detached(
                lambda: record_early_end(
                    self.recorder,
                    early_input,
                    "the run was cancelled",
                    {"cancelled": True, "code": "CANCELLED"},
                    cleanup_timeout_seconds=cleanup,
                ),
                timeout_seconds=cleanup,
            )
            return
        await record_early_end(
            self.recorder,
            early_input,
            ending.message,
            {"reason": ending.reason, "code": ending.code},
            cleanup_timeout_seconds=cleanup,
        )

    async def _end_loop(self, scope: RunScope, ending: Ending) -> RunResult | None:
        """Its answer streamed (already recorded), or its failure or cancellation recorded and
        streamed — each after its session's turn is released."""
        cleanup = self._services.cleanup_timeout_seconds
        if ending.cancelled:
            await record_cancelled(scope, ending.reason, cleanup_timeout_seconds=cleanup)
            if ending.reason:
                await self._release_turn(None, cancelled=True)
                # Cancelled from here (the agent was terminated), not by the caller: it still
                # listens, and learns why.
                cancelled = grpc.StatusCode.CANCELLED.name
                message = f"the run was cancelled: {ending.reason}"
                scope.sink.emit_last(scope.origin.event(run_failed=run_failed(cancelled, message, cancelled)))
            return None
        if ending.result is None:
            await record_failure(
                scope,
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
        await scope.sink.emit(
            scope.origin.event(
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
        scope.sink.close()
        return result

    async def _release_turn(self, result: RunResult | None, *, cancelled: bool = False) -> None:
        """A run that is its session's turn reports its end before its caller sees the end, so
        that the caller's next message finds the session free (the finisher sends it without its
        batch window). The wait is bounded: a registry that does not answer delays the caller's
        last event by at most the cleanup timeout, and the turn is released once the end is
        delivered. Other runs' ends are reported once their stream ended (`end`)."""
        if not self.double_texting:
            return
        taken = self._report_end(result, cancelled=cancelled, urgent=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(taken), self._services.cleanup_timeout_seconds)

    def _report_end(
        self, result: RunResult | None, *, cancelled: bool = False, urgent: bool = False
    ) -> asyncio.Future[None]:
        """Hands the run's end (answered, cancelled or failed; its usage) to the finisher, which
        reports it to the registry: a future done once the registry took it (`urgent`: at once).
        The finisher holds the lease from here: a renewal's `lost` must not stop it (durability.md)."""
        self._end_reported = True
        self._release_lease()
        # What its own model calls used, answered or not (its delegations report their own).
        meter = self.scope.meter if self.scope is not None else UsageMeter()
        usage, principal = meter.total, current_principal.get()
        return self._services.finisher.finish(
            self.spec.agent.id,
            self.run_id,
            completed=result is not None,
            cancelled=cancelled and result is None,
            tokens_used=usage.total_tokens,
            cost=usage.cost,
            session_id=self.request.session_id,
            user_id=principal.user_id if principal else "",
            model_usage=[
                ModelUsage(model=model, calls=tally.calls, usage=usage_proto(tally.usage))
                for model, tally in sorted(meter.by_model.items())
            ],
            urgent=urgent,
        )

    def _given_up(self) -> bool:
        """Whether the run stops here without an end: handed over, lease lost, superseded."""
        return self._cancel_reason() in GIVEN_UP or self.recorder.superseded is not None

    def _cancel_reason(self) -> str | None:
        return self._cancel_reasons.get(asyncio.current_task())  # type: ignore[arg-type]
