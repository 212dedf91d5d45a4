"""Workflow agents (after Google ADK's): `sequential`, `parallel` and `loop` run their sub-agents —
agents of the same project — through executors over gRPC, exactly like delegations but with
`as_sub_agent` set, so that a sub-agent may escalate with `exit_loop`.

- sequential: once each, in order; each gets the previous one's answer (the first, the input);
  the answer is the last one's. An escalation stops it and passes up to the enclosing loop.
- parallel: all at once on the same input, each in its own branch; events merge as they come;
  the answers are joined in sub-agent order. An escalation in a branch passes up.
- loop: in order, again and again, until `max_iterations` (0: until an escalation, under the
  executor's safety cap) or until a sub-agent escalates. The escalation ends this loop only —
  the innermost one — after the escalating sub-agent's events; the loop itself does not escalate.

Each sub-agent run carries a `sub_agent_id` — the workflow's run id and the sub-agent's step
("<run_id>:<step>", steps counted from 1 across a loop's iterations; a parallel branch's step is
its place) — and the workflow's run id as its `caller_run_id`, so it outlives a broken stream.
A sub-agent run that waits for a person suspends (loops/asking.py), and the workflow suspends
waiting on it (a parallel one once every other branch is done).
A workflow resumed from the log (`sub_agent_runs`, read at takeover) goes through the same steps:
a step whose run is in the log is not started again — its recorded end is taken, or waited for
while it is still going (whoever holds it finishes it) — and the first step with no run is
started under its id. So a resumed sequential or loop workflow goes on with the answer it had,
recovers its iteration and escalation, and a parallel one runs only its missing branches
(docs/durability.md, "Workflows").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.runtime import kind_name
from agentmesh.executor.context.scope import RunFailure, RunResult, RunScope
from agentmesh.executor.delegation.executor_runs import ExecutorRuns, child_request, follow
from agentmesh.executor.delegation.outcome import ChildOutcome
from agentmesh.executor.durability.child_log import ChildLog
from agentmesh.executor.errors import SUB_AGENT_FAILED, DelegationDepthExceeded
from agentmesh.executor.loops.asking import RunSuspends
from agentmesh.executor.loops.telemetry import sub_agent_span

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkflowSettings:
    """What workflow agents are configured with (from the executor's settings, in `app.py`)."""

    loop_safety_max_iterations: int
    max_delegation_depth: int
    delegation_timeout_seconds: float


class WorkflowRun:
    """Runs one input through a workflow agent."""

    def __init__(
        self,
        scope: RunScope,
        *,
        executor_runs: ExecutorRuns,
        settings: WorkflowSettings,
        log: ChildLog,
        sub_agent_runs: dict[str, str] | None = None,
    ) -> None:
        self._scope = scope
        self._runs_on_pool = executor_runs
        self._settings = settings
        self._log = log
        # A resumed workflow's sub-agent runs found in the log, by sub_agent_id (None: not resumed).
        self._logged = sub_agent_runs or {}
        self._result = RunResult()

    async def run(self) -> RunResult:
        kind = kind_name(self._scope.spec.kind)
        sub_agents = list(self._scope.spec.sub_agents)
        if kind == "sequential":
            await self._sequential(sub_agents)
        elif kind == "parallel":
            await self._parallel(sub_agents)
        else:
            await self._loop(sub_agents)
        return self._result

    async def _sequential(self, sub_agents: list[str]) -> None:
        text = self._scope.request.input
        for name in sub_agents:
            child = await self._run(name, text)
            text = child.content or text
            if child.escalated:
                self._result.escalated = True
                break
        self._result.content = text

    async def _parallel(self, sub_agents: list[str]) -> None:
        children: list[ChildOutcome] = [ChildOutcome() for _ in sub_agents]

        async def branch(index: int, name: str) -> None:
            children[index] = await self._run(name, self._scope.request.input, step=index + 1)

        try:
            async with asyncio.TaskGroup() as group:
                for index, name in enumerate(sub_agents):
                    group.create_task(branch(index, name))
        except* RunFailure as failures:
            raise failures.exceptions[0] from None
        # Branches that wait for a person: the workflow waits on them all (the others ended).
        below = [child.suspended for child in children if child.suspended is not None]
        if below:
            raise RunSuspends([], below=below)
        self._result.content = "\n\n".join(child.content for child in children if child.content)
        self._result.escalated = any(child.escalated for child in children)

    async def _loop(self, sub_agents: list[str]) -> None:
        spec, safety = self._scope.spec, self._settings.loop_safety_max_iterations
        limit = min(spec.max_iterations, safety) if spec.max_iterations > 0 else safety
        text = self._scope.request.input
        for iteration in range(1, limit + 1):
            self._result.metadata["iterations"] = iteration
            for name in sub_agents:
                child = await self._run(name, text)
                text = child.content or text
                if child.escalated:
                    # Ends this loop — the innermost — and goes no further up.
                    self._result.metadata["escalated_by"] = name
                    self._result.content = text
                    return
        if spec.max_iterations <= 0 or spec.max_iterations > safety:
            # It ran into the safety cap rather than a bound of its own: say so.
            self._result.max_steps_reached = True
        self._result.content = text

    async def _run(self, name: str, text: str, *, step: int = 0) -> ChildOutcome:
        scope = self._scope
        self._result.steps += 1
        sub_agent_id = f"{scope.origin.run_id}:{step or self._result.steps}"
        await scope.sink.emit(scope.origin.event(step_started=run_pb2.StepStarted(step=self._result.steps)))
        depth = scope.depth + 1
        if depth > self._settings.max_delegation_depth:
            raise RunFailure(
                "FAILED_PRECONDITION",
                f"running sub-agent {name!r} would nest {depth} runs deep; the limit is "
                f"{self._settings.max_delegation_depth}",
                reason=DelegationDepthExceeded.default_reason,
            )
        logged = self._logged.get(sub_agent_id)
        with sub_agent_span(agent=name, depth=depth):
            if logged:
                # Started before the workflow was resumed: its end, recorded or to come.
                child = await follow(self._log, logged, self._settings.delegation_timeout_seconds)
            else:
                child = await self._start(name, text, sub_agent_id)
        self._result.total_usage += child.usage
        self._scope.meter.below += child.usage
        if child.suspended is not None:
            if step:
                return child  # a parallel branch: the workflow waits once every branch is done
            # It waits for a person: so does the workflow, and it goes on from this step's end.
            raise RunSuspends([], below=[child.suspended])
        if not child.completed:
            raise RunFailure(
                child.code or "INTERNAL",
                f"sub-agent {name!r} failed: {child.message}",
                reason=SUB_AGENT_FAILED,
            )
        return child

    async def _start(self, name: str, text: str, sub_agent_id: str) -> ChildOutcome:
        scope = self._scope
        return await self._runs_on_pool.run(
            child_request(
                scope,
                name,
                text,
                parent_event_id=scope.input_event_id,
                as_sub_agent=True,
                sub_agent_id=sub_agent_id,
            ),
            scope.sink,
            log=self._log,
            follow_timeout_seconds=self._settings.delegation_timeout_seconds,
        )
