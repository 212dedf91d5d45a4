"""Admitting a run: resolving its agent, checking it is a run this executor takes, starting it at
the registry (the agent goes `working`) and recording its input — which makes the `Run` (run.py)
that lives from then on to its end.

A refusal — an unknown, paused or terminated agent, a delegation too deep, a workflow without
sub-agents — leaves as the gRPC status before `run_started`. An agent last seen runnable records
its input while the registry starts the run (that append is the one to wait for anyway), so a
refusal that comes after it is recorded too, as the run's end (`Run.end`): a session never ends
on an unanswered input. A run refused for its project's limits (QUOTA_EXCEEDED) is that too, and
for a while after one, this executor records that project's runs' inputs only once they started,
so the refusals that follow leave nothing in their sessions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agentmesh.executor.agents.runtime import kind_name
from agentmesh.executor.agents.specs import AgentSpecs, SpecKey
from agentmesh.executor.context.budget import tighten
from agentmesh.executor.durability.outbox import EventOutbox
from agentmesh.executor.durability.recorder import Recorder
from agentmesh.executor.errors import DelegationDepthExceeded, NoSubAgents
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.executor.run.run import Run, RunServices
from agentmesh.executor.run.turns import policy_violations, turn_policy
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import AgentTerminated
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError, FieldViolation, QuotaExceeded, ValidationFailed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedAgent:
    """The agent a request names, as this executor knows it: remembered from an earlier run of
    the same caller, or just resolved."""

    key: SpecKey
    spec: resources_pb2.AgentSpec
    remembered: bool


class RunAdmission:
    """Decides whether a run may start and starts it; see the module's docstring."""

    def __init__(
        self,
        *,
        services: RunServices,
        specs: AgentSpecs,
        max_delegation_depth: int,
        outbox: EventOutbox | None = None,
        secrets: Secrets | None = None,
        max_concurrent_starts: int = 32,
    ) -> None:
        # A burst of thousands of runs (the 5,000-stream bench) sent as thousands of concurrent
        # starts queues them in the registry's connection pool for longer than its timeout and
        # than a lease: they wait here instead, and the registry stays responsive to renewals.
        self._start_slots = asyncio.Semaphore(max_concurrent_starts)
        self._services = services
        self._secrets = secrets
        self._outbox = outbox
        self._specs = specs
        self._max_delegation_depth = max_delegation_depth

    async def resolve(self, request: executor_service_pb2.RunRequest) -> ResolvedAgent:
        """The agent the request names, asking the registry only when it is not remembered."""
        key = self._specs.key(request.project_slug, request.agent_name)
        spec = self._specs.remembered(key)
        if spec is not None:
            return ResolvedAgent(key, spec, remembered=True)
        return ResolvedAgent(key, await self._specs.resolve(key), remembered=False)

    async def admit(self, request: executor_service_pb2.RunRequest, agent: ResolvedAgent, run_id: str) -> Run:
        """Checks the run, starts it at the registry and, when the agent changed since it was
        remembered, checks it again against the current spec: the run. Raises the refusal (the
        run ended)."""
        self._check_runnable(request, agent.spec)
        if agent.remembered and self._specs.watched:
            _refuse_if_terminated(agent.spec)  # pushed: refused here, before anything is recorded
        recorder = Recorder(
            self._services.memory,
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
        run = Run(
            request,
            agent.spec,
            recorder,
            services=self._services,
            double_texting=turn_policy(request, agent.spec),
            # A delegated run takes no turn (it waits for no run ahead): the history it reads
            # with its input is the history its loop starts from.
            history_window=self._services.history_window_events
            if request.delegation_id and kind_name(agent.spec.kind) == "llm"
            else 0,
        )
        # Started first, its input recorded after (when it goes live): an input in the log always
        # has a lease, so an executor that dies in between leaves a run its taker resumes, never
        # an input nobody answers; and a refusal leaves nothing behind.
        start = await self._start(run, agent.key)
        run.runs_ahead = tuple(start.runs_ahead)
        # What is left of the project's budgets bounds the run as a chat's budget does.
        tighten(run.request.budget, start.project_budget)
        if start.spec_revision != run.spec.revision:
            await self._refresh(run, agent.key)
        return run

    async def _start(self, run: Run, key: SpecKey) -> registry_internal_service_pb2.StartAgentRunResponse:
        """Starts the run at the registry. Refused, it ends (an input recorded already gets its
        end), and the registry has no run to finish; cancelled, it ends too, and is finished: the
        registry may have started it before the answer was lost."""
        async with run.ends_on_error(registry_refuses=True):
            try:
                async with self._start_slots:
                    return await self._services.registry.start_agent_run(
                        run.spec.agent.id,
                        run.run_id,
                        session_id=run.request.session_id,
                        executor_id=self._services.executor_id,
                        double_texting=run.double_texting,
                    )
            except DomainError as error:
                if error.reason != QuotaExceeded.default_reason:
                    self._specs.forget(key)
                raise

    async def _refresh(self, run: Run, key: SpecKey) -> None:
        """The run started on a spec that changed since it was remembered, or its session uses
        another version of the agent: resolves it again, as its session has it. Refused now, it
        ends, and is finished."""
        async with run.ends_on_error():
            run.spec = await self._specs.resolve(key, session_id=run.request.session_id)
            self._check_runnable(run.request, run.spec)

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
