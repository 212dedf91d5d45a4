"""Admitting a run: resolving its agent, checking it is a run this executor takes, starting it at
the registry (the agent goes `working`) and recording its input.

A refusal — an unknown, paused or terminated agent, a delegation too deep, a workflow without
sub-agents — leaves as the gRPC status before `run_started`. An agent last seen runnable records
its input while the registry starts the run (that append is the one to wait for anyway), so a
refusal that comes after it is recorded too: a session never ends on an unanswered input.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from agentmesh.executor.agents.runtime import kind_name
from agentmesh.executor.agents.specs import AgentSpecs, SpecKey
from agentmesh.executor.context.scope import RunResult
from agentmesh.executor.durability.detached import run_detached
from agentmesh.executor.durability.finisher import RunFinisher
from agentmesh.executor.durability.outbox import EventOutbox
from agentmesh.executor.durability.recorder import EventType, NewEvent, Recorder, end_key
from agentmesh.executor.errors import DelegationDepthExceeded, NoSubAgents
from agentmesh.executor.providers.base import Message
from agentmesh.executor.providers.factory import recorded_settings
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.executor.run import history
from agentmesh.executor.run.turns import policy_violations, turn_policy
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_resources_pb2
from agentmesh.registry.client import AgentTerminated, RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError, FieldViolation, ValidationFailed

logger = logging.getLogger(__name__)

_BLOCKED = (resources_pb2.AGENT_STATUS_PAUSED, resources_pb2.AGENT_STATUS_TERMINATED)


@dataclass(frozen=True)
class ResolvedAgent:
    """The agent a request names, as this executor knows it: remembered from an earlier run of
    the same caller, or just resolved."""

    key: SpecKey
    spec: resources_pb2.AgentSpec
    remembered: bool


@dataclass
class AdmittedRun:
    """A run the registry started: its request, its agent's current spec, its recorder, and its
    input if that is being recorded already."""

    request: executor_service_pb2.RunRequest
    spec: resources_pb2.AgentSpec
    recorder: Recorder
    early_input: asyncio.Future[memory_resources_pb2.Event] | None = None
    cleanup_timeout_seconds: float = 5.0
    loop_started: bool = False  # from then on the run's loop records its end
    end_reported: bool = False  # its end was handed to the finisher (once, by whichever path)
    # A user's message is its session's next turn under this double-texting policy ("" for a
    # delegated or sub-agent run), behind these runs still in flight (turns.py).
    double_texting: str = ""
    runs_ahead: tuple[str, ...] = ()
    _input_requested: bool = False
    # A delegated LLM run records its input and reads its history window (this many events) in
    # one call (history.py); `listed_history` is that page once the input is recorded.
    history_window: int = 0
    listed_history: memory_service_pb2.ListEventsResponse | None = None

    @property
    def run_id(self) -> str:
        return self.recorder.run_id

    def report_end(
        self, finisher: RunFinisher, result: RunResult | None, *, urgent: bool = False
    ) -> asyncio.Future[None]:
        """Hands the run's end (whether it answered, its usage) to the finisher, which reports it
        to the registry; done once the registry took it. `urgent`: without the batch window."""
        self.end_reported = True
        usage = result.usage if result else None
        return finisher.finish(
            self.spec.agent.id,
            self.run_id,
            completed=result is not None,
            tokens_used=usage.total_tokens if usage else 0,
            cost=usage.cost if usage else 0.0,
            urgent=urgent,
        )

    @property
    def input_requested(self) -> bool:
        """Whether the input's append was sent (or may have been): from then on the run may be
        in the log, where whoever takes it over finds it."""
        return self.early_input is not None or self._input_requested

    def record_input(self) -> Awaitable[memory_resources_pb2.Event]:
        """The input's event: the one recorded alongside the start, else recorded now."""
        self._input_requested = True
        return self.early_input or _record_input(self)

    async def history(
        self, memory: MemoryClient, received: memory_resources_pb2.Event, *, window: int
    ) -> list[Message]:
        """The agent's context window (history.py): read with the input when the run asked for
        it there (a delegated run), else read now — not at all when the input was the session's
        first event (a new session has no history)."""
        if self.listed_history is not None:
            return history.messages(self.listed_history, window=window, exclude_run_id=self.run_id)
        if received.seq <= 1:
            return []
        return await history.read_history(
            memory,
            session_id=self.recorder.session_id,
            project_id=self.recorder.project_id,
            agent=self.recorder.agent,
            window=window,
            exclude_run_id=self.run_id,
        )

    def abandon_input(self) -> None:
        """Stops recording the input early (the run goes no further)."""
        if self.early_input is not None:
            self.early_input.cancel()

    async def record_refusal(self, error: DomainError) -> None:
        """When the input was recorded alongside the start and the run was then refused (the
        registry would not start it: the agent was paused or terminated since; or the agent
        cannot be set up), records the refusal after it, as the run's end."""
        await self._end_early(error.message, {"reason": error.reason, "code": error.code.name})

    async def record_cancelled(self, *, timeout_seconds: float) -> None:
        """When the input was recorded alongside the start and the run was cancelled before its
        loop began (which records its own end), records the cancellation as the run's end —
        detached from the cancellation, as every end is."""
        if self.early_input is not None:
            await run_detached(
                lambda: self._end_early("the run was cancelled", {"cancelled": True, "code": "CANCELLED"}),
                timeout_seconds=timeout_seconds,
            )

    async def _end_early(self, message: str, metadata: dict[str, Any]) -> None:
        if self.early_input is None:
            return
        try:
            received = await self.early_input
            await self.recorder.record_end(
                EventType.EVENT_TYPE_ERROR,
                message,
                metadata=metadata,
                parent_event_id=received.id,
                idempotency_key=end_key(self.run_id),
                timeout_seconds=self.cleanup_timeout_seconds,
            )
        except Exception:
            logger.warning("could not record the end of refused run %s", self.run_id, exc_info=True)


class RunAdmission:
    """Decides whether a run may start and starts it; see the module's docstring."""

    def __init__(
        self,
        *,
        registry: RegistryClient,
        memory: MemoryClient,
        specs: AgentSpecs,
        finisher: RunFinisher,
        max_delegation_depth: int,
        executor_id: str,
        cleanup_timeout_seconds: float,
        outbox: EventOutbox | None = None,
        secrets: Secrets | None = None,
        max_concurrent_starts: int = 32,
        history_window_events: int = 0,
    ) -> None:
        # A burst of thousands of runs (the 5,000-stream bench) sent as thousands of concurrent
        # starts queues them in the registry's connection pool for longer than its timeout and
        # than a lease: they wait here instead, and the registry stays responsive to renewals.
        self._start_slots = asyncio.Semaphore(max_concurrent_starts)
        self._history_window_events = history_window_events
        self._secrets = secrets
        self._outbox = outbox
        self._executor_id = executor_id
        self._cleanup_timeout_seconds = cleanup_timeout_seconds
        self._registry = registry
        self._memory = memory
        self._specs = specs
        self._finisher = finisher
        self._max_delegation_depth = max_delegation_depth

    async def resolve(self, request: executor_service_pb2.RunRequest) -> ResolvedAgent:
        """The agent the request names, asking the registry only when it is not remembered."""
        key = self._specs.key(request.project_slug, request.agent_name)
        spec = self._specs.remembered(key)
        if spec is not None:
            return ResolvedAgent(key, spec, remembered=True)
        return ResolvedAgent(key, await self._specs.resolve(key), remembered=False)

    async def admit(
        self, request: executor_service_pb2.RunRequest, agent: ResolvedAgent, run_id: str
    ) -> AdmittedRun:
        """Checks the run, starts it at the registry and, when the agent changed since it was
        remembered, checks it again against the current spec. Raises the refusal."""
        self._check_runnable(request, agent.spec)
        if agent.remembered and self._specs.watched:
            _refuse_if_terminated(agent.spec)  # pushed: refused here, before anything is recorded
        recorder = Recorder(
            self._memory,
            session_id=request.session_id,
            project_id=agent.spec.agent.project_id,
            agent=agent.spec.agent.slug or agent.spec.agent.name,
            agent_name=agent.spec.agent.name,
            run_id=run_id,
            delegation_id=request.delegation_id,
            secrets=self._secrets,
            agent_id=agent.spec.agent.id,
            outbox=self._outbox,
        )
        run = AdmittedRun(
            request,
            agent.spec,
            recorder,
            cleanup_timeout_seconds=self._cleanup_timeout_seconds,
            double_texting=turn_policy(request, agent.spec),
            # A delegated run takes no turn (it waits for no run ahead): the history it reads
            # with its input is the history its loop starts from.
            history_window=self._history_window_events
            if request.delegation_id and kind_name(agent.spec.kind) == "llm"
            else 0,
        )
        # An agent that was not runnable when last seen, or is new here, is started first, so a
        # refusal leaves nothing behind; so is a message its session may reject.
        if agent.remembered and agent.spec.agent.status not in _BLOCKED and run.double_texting != "reject":
            run.early_input = asyncio.ensure_future(_record_input(run))
        start = await self._start(run, agent.key)
        run.runs_ahead = tuple(start.runs_ahead)
        if start.spec_revision != run.spec.revision:
            await self._refresh(run, agent.key)
        return run

    async def _start(
        self, run: AdmittedRun, key: SpecKey
    ) -> registry_internal_service_pb2.StartAgentRunResponse:
        try:
            async with self._start_slots:
                return await self._registry.start_agent_run(
                    run.spec.agent.id,
                    run.run_id,
                    session_id=run.request.session_id,
                    executor_id=self._executor_id,
                    double_texting=run.double_texting,
                )
        except asyncio.CancelledError:
            # The input may be stored already: it gets its end. And the registry may have
            # started the run before the answer was lost: finish it.
            self._finish_unanswered(run)
            await run.record_cancelled(timeout_seconds=self._cleanup_timeout_seconds)
            raise
        except DomainError as error:
            self._specs.forget(key)
            await run.record_refusal(error)
            raise
        except BaseException:
            run.abandon_input()
            raise

    async def _refresh(self, run: AdmittedRun, key: SpecKey) -> None:
        """The run started on a spec that changed since it was remembered: resolves it again."""
        try:
            run.spec = await self._specs.resolve(key)
            self._check_runnable(run.request, run.spec)
        except DomainError as error:
            await run.record_refusal(error)
            self._finish_unanswered(run)
            raise
        except asyncio.CancelledError:
            self._finish_unanswered(run)
            await run.record_cancelled(timeout_seconds=self._cleanup_timeout_seconds)
            raise
        except BaseException:
            run.abandon_input()
            self._finish_unanswered(run)
            raise

    def _finish_unanswered(self, run: AdmittedRun) -> None:
        run.report_end(self._finisher, None)

    def _check_runnable(
        self, request: executor_service_pb2.RunRequest, spec: resources_pb2.AgentSpec
    ) -> None:
        if request.delegation_depth > self._max_delegation_depth:
            raise DelegationDepthExceeded(
                f"delegation depth {request.delegation_depth} is past the limit of "
                f"{self._max_delegation_depth}"
            )
        kind = kind_name(spec.kind)
        if kind != "llm" and not spec.sub_agents:
            raise NoSubAgents(f"{kind} agent {spec.agent.name!r} has no sub-agents")


def _refuse_if_terminated(spec: resources_pb2.AgentSpec) -> None:
    """Refuses a run of an agent the registry pushed as terminated, with the status, reason and
    message its StartAgentRun would have refused it with. Termination is final, so the push
    cannot be out of date. A pushed pause is not refused here: a resume that committed just
    before this run came in may not have been pushed yet, and refusing then would be wrong — the
    run's start asks (its input not recorded first, as for any agent last seen not runnable)."""
    if spec.agent.status == resources_pb2.AGENT_STATUS_TERMINATED:
        raise AgentTerminated(f"agent {spec.agent.name!r} is terminated")


async def _record_input(run: AdmittedRun) -> memory_resources_pb2.Event:
    request, recorder = run.request, run.recorder
    received = NewEvent(
        EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED
        if request.delegation_id
        else EventType.EVENT_TYPE_USER_MESSAGE,
        request.input,
        parent_event_id=request.parent_event_id,
        metadata=_input_metadata(request),
    )
    if not run.history_window:
        (event,) = await recorder.record_many([received])
        return event
    window = history.listing(
        session_id=recorder.session_id,
        project_id=recorder.project_id,
        agent=recorder.agent,
        window=run.history_window,
    )
    event, run.listed_history = await recorder.record_then_list(received, window)
    return event


def _input_metadata(request: executor_service_pb2.RunRequest) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if request.delegation_path:
        metadata["delegation_path"] = list(request.delegation_path)
        metadata["depth"] = request.delegation_depth
    if request.as_sub_agent:
        metadata["as_sub_agent"] = True
    if settings := recorded_settings(request.model_settings):
        metadata["model_settings"] = settings  # for a resumed run (resumption.resumed_request)
    if request.sub_agent_id:
        metadata["sub_agent_id"] = request.sub_agent_id  # how a resumed workflow finds this run
    if request.caller_run_id:
        # The input is refused once the caller was taken over since (memory `fence.py`).
        metadata["caller_run_id"] = request.caller_run_id
        if request.caller_resume:
            metadata["caller_resume"] = request.caller_resume
    return metadata


def validate_request(request: executor_service_pb2.RunRequest) -> None:
    """The request names what a run needs, and its double-texting settings are valid."""
    violations = [
        FieldViolation(name, "is required")
        for name, value in (
            ("project_slug", request.project_slug),
            ("agent_name", request.agent_name),
            ("session_id", request.session_id),
        )
        if not value
    ]
    if request.delegation_depth < 0:
        violations.append(FieldViolation("delegation_depth", "must not be negative"))
    violations += policy_violations(request)
    if violations:
        raise ValidationFailed.of(violations)
