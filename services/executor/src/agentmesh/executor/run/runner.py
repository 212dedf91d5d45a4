"""Runs agents: admits each run (admission.py makes its `Run`) and lets it live (run.py: its
agent's runtime from the cache, its start, its steps, its end); this module keeps the runs in
flight here (slots, leases, cancelling, handing over, resuming runs taken over) and each run's
bookkeeping (metrics, the runs in flight) after its end.

A run is a task of its own that emits into a bounded sink the caller's stream drains. When the
caller goes away (cancel, disconnect, deadline) the stream's end cancels the task — unless the
request names its caller's run, which then follows it in the log (outliving.py) — and with it
everything below it: model calls, tools, and delegated or sub-agent runs on other executors
(their gRPC calls are cancelled). Whatever happens, the run's end is recorded — an `error` event
with `{"cancelled": true}` for a cancelled run — and the agent goes back to idle.

Errors before the run started (unknown or paused agent, depth exceeded, a tool or model that
cannot be set up) leave as the gRPC status; after `run_started`, a run ends with RunFailed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry.trace import Span

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.cache import AgentCache
from agentmesh.executor.agents.runtime import AgentBuilder, AgentRuntime, kind_name
from agentmesh.executor.context.events import EventSink
from agentmesh.executor.context.scope import RunResult
from agentmesh.executor.durability.handover import Handover
from agentmesh.executor.durability.outbox import EventOutbox
from agentmesh.executor.durability.recorder import RunSuperseded
from agentmesh.executor.durability.resumption import resumed_request, taker_recorder
from agentmesh.executor.durability.run_log import RunLog
from agentmesh.executor.errors import (
    ExecutorBusy,
    RunHandedOver,
    RunLeaseLost,
    RunTakenOver,
)
from agentmesh.executor.run.admission import RunAdmission, validate_request
from agentmesh.executor.run.run import HANDED_OVER, LOST, Run, RunServices
from agentmesh.executor.run.turns import INTERRUPTED, turn_policy
from agentmesh.executor.settings import ExecutorSettings
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime import metrics, telemetry
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import bearer_token, current_token, token_source

logger = logging.getLogger(__name__)

# How a run stops here without an end while it goes on elsewhere (its taker resumes it), or may be
# sent elsewhere (nothing of it was recorded).
_GONE_ON_ELSEWHERE = (RunHandedOver, RunTakenOver, RunLeaseLost)


class RunExecutor:
    """Runs one input through one agent until it answers, as a stream of RunEvents."""

    def __init__(
        self,
        *,
        settings: ExecutorSettings,
        services: RunServices,
        admission: RunAdmission,
        builder: AgentBuilder,
        cache: AgentCache[AgentRuntime],
        handover: Handover,
        outbox: EventOutbox | None = None,
    ) -> None:
        self._settings = settings
        self._services = services
        self._registry = services.registry
        self._memory = services.memory
        self._executor_runs = services.executor_runs
        self._admission = admission
        self._builder = builder
        self._cache = cache
        self._outbox = outbox
        self._slots = asyncio.Semaphore(settings.max_concurrent_runs)
        self._runs: set[asyncio.Task[None]] = set()
        self._runs_by_agent: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancel_reasons: dict[asyncio.Task[Any], str] = {}
        # Runs started at the registry and not yet finished here, by run id: what this
        # executor holds leases on (leases.py).
        self._leased: dict[str, tuple[str, asyncio.Task[Any]]] = {}
        # Graceful drain past its grace: runs stopped without an end, for another executor to
        # resume (`hand_over`).
        self._handover = handover
        self._handed_over: set[asyncio.Task[Any]] = set()
        # Runs whose lease was lost (`lose`): stopped without an end, their taker's now.
        self._lost: set[asyncio.Task[Any]] = set()
        # Runs that go on when their stream breaks (their caller follows them in the log).
        self._outliving = services.outliving

    @property
    def active_runs(self) -> int:
        return len(self._runs)

    async def run_batches(
        self, request: executor_service_pb2.RunRequest
    ) -> AsyncIterator[list[run_pb2.RunEvent]]:
        """Runs `request`: its events, in the batches they queued up in while the caller was busy
        sending the batch before (`EventSink.drain_batches`)."""
        validate_request(request)
        if self._slots.locked():
            raise ExecutorBusy(f"executor is running {self._settings.max_concurrent_runs} runs; try another")
        await self._slots.acquire()
        sink = EventSink(self._settings.event_buffer_size, secrets=self._builder.secrets)
        task = asyncio.create_task(self._execute(request, sink), name=f"run {request.agent_name}")
        self._runs.add(task)

        def finished(done: asyncio.Task[None]) -> None:
            self._runs.discard(done)
            self._slots.release()
            if not done.cancelled() and isinstance(done.exception(), _GONE_ON_ELSEWHERE):
                # Heard by its caller when there still is one; when it left first, nobody needs
                # to: the run goes on from the log elsewhere (asyncio would log it as an error).
                logger.info("run of %s stopped here: %s", request.agent_name, done.exception())

        task.add_done_callback(finished)
        answered = False
        try:
            async for batch in sink.drain_batches(task):  # raises a run given up here (`_given_up`)
                yield batch
            answered = True
        finally:
            if not answered and not self._outlive(request, task, sink):
                # The caller went away: nothing more may start below it. The task records its
                # end on its own; it is tracked until then.
                task.cancel()

    def _outlive(
        self, request: executor_service_pb2.RunRequest, task: asyncio.Task[None], sink: EventSink
    ) -> bool:
        """Whether the run goes on after its stream broke (outliving.py). Not while handing
        over: the run stops here, and its caller's taker follows it to its taker."""

        return not self._handover.started and self._outliving.keep(
            request, task, sink, cancel=lambda reason: self._cancel(task, reason)
        )

    async def cancel_runs(self, project_id: str, agent_id: str, reason: str, run_id: str = "") -> int:
        """Cancels the agent's runs in flight here, or only its run `run_id` (after the caller
        proved it may see the agent); each records why and ends with RunFailed CANCELLED. How
        many it cancelled."""
        await self._registry.get_agent(project_id, agent_id)
        tasks = list(self._runs_by_agent.get(agent_id, ()))
        if run_id:
            leased = self._leased.get(run_id)
            tasks = [leased[1]] if leased is not None and leased[1] in tasks else []
        for task in tasks:
            self._cancel(task, reason or "cancelled")
        return len(tasks)

    def leased_runs(self) -> list[tuple[str, str]]:
        """(agent id, run id) of every run this executor holds a lease on."""
        return [(agent_id, run_id) for run_id, (agent_id, _) in self._leased.items()]

    def interrupt(self, run_id: str) -> None:
        """A newer message of the run's session interrupts it (double texting, turns.py): it
        stops here, recorded as cancelled with why."""
        self._stop(run_id, INTERRUPTED)

    def lose(self, run_id: str) -> asyncio.Task[Any] | None:
        """The run's lease expired (this executor was cut off from the registry, or stalled, for
        longer than the lease time) and the run was taken over: it stops here without recording
        an end — its taker resumes it from the log — and its caller is told where to follow it
        (`_given_up`). Returns the run's task, stopping (None when it is not running here, or
        already stopping for another reason: it records its end, or learns it was superseded)."""
        task = self._stop(run_id, LOST)
        if task is not None:
            self._lost.add(task)
        return task

    def _stop(self, run_id: str, reason: str) -> asyncio.Task[Any] | None:
        """Cancels the run's task with `reason`: the task (None when the run is not here or
        already stopping)."""
        leased = self._leased.get(run_id)
        if leased is None:
            return None
        _, task = leased
        return task if self._cancel(task, reason) else None

    def _cancel(self, task: asyncio.Task[Any], reason: str) -> bool:
        """Cancels a run's task, saying why — once: a run already stopping keeps its first reason
        and is left to record its end (a second cancellation would cut that short, and its
        caller's stream would end without the run's RunFailed: an interrupted run is interrupted
        again by the next lease renewal). Whether it cancelled the task."""
        if task in self._cancel_reasons:
            return False
        self._cancel_reasons[task] = reason
        task.cancel()
        return True

    async def hand_over(self) -> list[tuple[str, str]]:
        """Stops every run here without recording its end (graceful drain past its
        grace): (agent id, run id) of each, whose leases the caller releases so that another
        executor resumes them at once. Their tool calls in flight are left in doubt, their open
        delegations to be answered by the resumed run. A run already stopping (cancelled) is
        left to record its end, and finished as usual."""
        self._handover.start()
        runs: list[tuple[str, str]] = []
        for run_id, (agent_id, task) in list(self._leased.items()):
            if self._cancel(task, HANDED_OVER):
                self._handed_over.add(task)
                runs.append((agent_id, run_id))
        tasks = [task for _, task in self._leased.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=self._settings.cleanup_timeout_seconds)
        return runs

    async def resume(
        self,
        orphan: registry_internal_service_pb2.OrphanedRun,
        spec: resources_pb2.AgentSpec,
        log: RunLog,
    ) -> None:
        """Goes on with a run taken over from a dead executor, from where its log stops
        (resumption.py), as the mesh itself (the system token), until its one end. Its events
        go to the log (clients follow it there), its stream to no one. Its taker's note is in
        the log: this is the run's incarnation `log.resumes` (resumption.py)."""
        assert log.input is not None
        number = log.resumes
        recorder = taker_recorder(
            self._memory,
            orphan,
            spec,
            log.input,
            resume=number,
            secrets=self._builder.secrets,
            outbox=self._outbox,
            key_prefix=f"{orphan.run_id}:resume{number}",
        )
        run = Run(
            resumed_request(orphan, spec, log.input),
            spec,
            recorder,
            services=self._services,
            received=log.input,
        )
        sink = EventSink(self._settings.event_buffer_size, secrets=self._builder.secrets)
        context = contextvars.copy_context()
        # As the executor itself, with its token renewed as it expires: a resumed run may wait
        # for its delegations longer than any one token lives, and must still record its end.
        context.run(current_token.set, bearer_token(self._executor_runs.system_metadata()))
        context.run(token_source.set, lambda: bearer_token(self._executor_runs.system_metadata()))
        task = asyncio.create_task(
            self._resumed(run, sink, log), name=f"resume {orphan.run_id}", context=context
        )
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        try:
            # A run given up here again (handed over, or its lease lost) raises: not closed, so
            # that its taker's registry row stays (reporting it closed would forget it).
            async for _ in sink.drain_batches(task):
                pass
        finally:
            if not task.done():
                task.cancel()

    async def _resumed(self, run: Run, sink: EventSink, log: RunLog) -> None:
        spec = run.spec
        kind = kind_name(spec.kind)
        with telemetry.run_span(
            agent=spec.agent.name,
            project=spec.project_slug,
            session_id=run.request.session_id,
            run_id=run.run_id,
            kind=kind,
            delegation_id=run.request.delegation_id,
            delegation_depth=run.request.delegation_depth,
        ) as span:
            if turn_policy(run.request, spec):
                # Its executor may have died while the run waited for its session's turn: it
                # waits for the turns still ahead of it again (none when its turn had come).
                run.double_texting = "enqueue"
                run.runs_ahead = tuple(
                    await self._registry.await_session_turn(
                        spec.agent.id,
                        run.run_id,
                        wait_seconds=0,
                        metadata=self._executor_runs.system_metadata(),
                    )
                )
            await self._live(run, sink, span, kind=kind, started=time.monotonic(), resumed=log)

    async def wait_idle(self, timeout_seconds: float) -> bool:
        """Waits up to `timeout_seconds` for the runs in flight to end: whether none is left."""
        if self._runs:
            await asyncio.wait(set(self._runs), timeout=timeout_seconds)
        return not self._runs

    async def drain(self, timeout_seconds: float) -> None:
        """Waits for runs in flight (at shutdown), cancelling those still going after the timeout."""
        if not self._runs:
            return
        _, pending = await asyncio.wait(set(self._runs), timeout=timeout_seconds)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=self._settings.cleanup_timeout_seconds)

    async def _execute(self, request: executor_service_pb2.RunRequest, sink: EventSink) -> None:
        """A run from its request to its end: admission, then its life."""
        agent = await self._admission.resolve(request)
        run_id = uuid.uuid4().hex
        kind = kind_name(agent.spec.kind)
        with telemetry.run_span(
            agent=agent.spec.agent.name,
            project=agent.spec.project_slug,
            session_id=request.session_id,
            run_id=run_id,
            kind=kind,
            delegation_id=request.delegation_id,
            delegation_depth=request.delegation_depth,
        ) as span:
            started = time.monotonic()
            run = await self._admission.admit(request, agent, run_id)
            await self._live(run, sink, span, kind=kind, started=started)

    async def _live(
        self,
        run: Run,
        sink: EventSink,
        span: Span,
        *,
        kind: str,
        started: float,
        resumed: RunLog | None = None,
    ) -> None:
        """An admitted run's life (`Run.live`, which ends it) and, whatever happens, its
        bookkeeping here: metrics, the runs in flight. A run given up here (handed over or its
        lease lost: its taker resumes it) raises where to follow it. (A resumed run was counted
        in again when its taker took it back, resumption.py.)"""
        task = self._track(run.spec.agent.id)
        self._leased[run.run_id] = (run.spec.agent.id, task)
        self._outliving.admitted(task, run.spec.agent.project_id)
        result: RunResult | None = None
        outcome: metrics.RunOutcome = "failed"
        given_up: DomainError | None = None
        try:
            result = await run.live(
                self._runtime(run),
                sink,
                resumed=resumed,
                interrupt=self.interrupt,
                cancel_reasons=self._cancel_reasons,
                release_lease=lambda: self._unlease(run.run_id, task),
            )
            if result is not None:
                outcome = "max_steps" if result.max_steps_reached else "completed"
            elif run.suspended:
                outcome = "suspended"
            span.set_attribute(
                telemetry.RUN_OUTCOME, "completed" if result else "suspended" if run.suspended else "failed"
            )
        except (RunSuperseded, asyncio.CancelledError):
            outcome = "cancelled"
            if run.recorder.superseded is not None:
                # Another executor took the run over, or ended it, while this one was cut off: it
                # stops here as a run whose lease was lost (no end, no finish: its taker's).
                logger.info("run %s stops here: %s", run.run_id, run.recorder.superseded.message)
                self._lost.add(task)
            given_up = self._given_up(task, run)
            if given_up is not None:
                raise given_up from None
            raise
        finally:
            metrics.record_run(
                kind=kind,
                outcome=outcome,
                seconds=time.monotonic() - started,
                delegated=bool(run.request.delegation_id),
            )
            self._untrack(run.spec.agent.id, task)
            self._unlease(run.run_id, task)
            self._lost.discard(task)
            self._outliving.ended(task)

    def _unlease(self, run_id: str, task: asyncio.Task[Any]) -> None:
        """Stops holding the run's lease here — unless another task holds it by now: a
        suspended run answered at once may be running here again, resumed, before the task that
        suspended it has finished."""
        leased = self._leased.get(run_id)
        if leased is not None and leased[1] is task:
            del self._leased[run_id]

    def _given_up(self, task: asyncio.Task[Any], run: Run) -> DomainError | None:
        """What a run stopped here without an end raises to its caller (None for any other
        cancellation): where to follow it — its taker resumes it from the log — or, when nothing
        of it was recorded yet, that it may be sent again."""
        if task in self._handed_over:
            return RunHandedOver(
                f"this executor is stopping and handed run {run.run_id} over: another executor resumes "
                "it from the session's log (follow it there by the last seq seen)",
                metadata={"run_id": run.run_id},
            )
        if task not in self._lost:
            return None
        if not run.input_requested:
            return RunLeaseLost(
                "this executor lost the run's lease before recording anything of it (it missed its "
                "lease renewals): nothing of the run exists, so it may be sent again"
            )
        return RunTakenOver(
            f"this executor lost the lease of run {run.run_id} (it missed its lease renewals) and "
            "another executor took it over: it goes on from the session's log",
            metadata={"run_id": run.run_id},
        )

    @contextlib.asynccontextmanager
    async def _runtime(self, run: Run) -> AsyncIterator[AgentRuntime]:
        """The run's agent's runtime, cached per session: built when missing or stale, pinned
        while the run uses it."""
        spec = run.spec
        signature, plan = await self._builder.plan(spec)
        async with self._cache.use(
            run.request.session_id,
            spec.agent.id,
            signature,
            lambda scope: self._builder.build(spec, signature, plan, scope),
        ) as runtime:
            yield runtime

    def _track(self, agent_id: str) -> asyncio.Task[Any]:
        """Notes the current task as a run of the agent here, so `cancel_runs` finds it."""
        task = asyncio.current_task()
        assert task is not None
        self._runs_by_agent.setdefault(agent_id, set()).add(task)
        return task

    def _untrack(self, agent_id: str, task: asyncio.Task[Any]) -> None:
        runs = self._runs_by_agent.get(agent_id, set())
        runs.discard(task)
        if not runs:
            self._runs_by_agent.pop(agent_id, None)
        self._cancel_reasons.pop(task, None)
