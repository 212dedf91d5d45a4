"""Run bookkeeping: executors report each run's start and end, and the agent's status and usage
follow (working while a run is in flight, idle after the last, usage added as each ends, and each
run's model calls entered in the cost ledger, usage/entries.py).

The lifecycle rules themselves (`agents/lifecycle.py`) are applied by the store, inside the one
statement that records the run, so concurrent runs of one agent cannot lose each other's counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentmesh.registry.agents.lifecycle import run_started, spec_revision
from agentmesh.registry.agents.versions import as_of, session_version
from agentmesh.registry.agents.watch import AgentWatch
from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.errors import AgentNotFound
from agentmesh.registry.models import Agent, FinishedRun
from agentmesh.registry.projects.budgets import RunBudget
from agentmesh.registry.projects.limits import ProjectQuotas
from agentmesh.registry.store import RegistryStore, RunChange, RunLease, Visibility
from agentmesh.registry.usage.entries import ledger_entries, report_violations
from agentmesh.registry.usage.models import UsageEntry
from agentmesh.registry.validation import raise_if, required
from agentmesh.runtime.errors import DomainError, FieldViolation
from agentmesh.runtime.identity import Principal

# Runs one FinishAgentRuns call may finish.
MAX_FINISHED_RUNS = 1000


@dataclass(frozen=True)
class StartedRun:
    """A run started: its agent (working), the revision of the spec it runs on, and what is left
    of its project's budgets for it."""

    agent: Agent
    spec_revision: str
    project_budget: RunBudget


class RunBookkeeping:
    """Runs started and finished by executors, counted against their agents."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        quotas: ProjectQuotas | None = None,
        clock: Clock = utc_now,
        watch: AgentWatch | None = None,
    ) -> None:
        self._store = store
        self._quotas = quotas
        self._now = clock
        self._watch = watch  # tells watching executors a parked run may be ready to go on

    async def start_run(
        self,
        principal: Principal,
        agent_id: str,
        run_id: str,
        *,
        lease: RunLease | None = None,
        session_id: str = "",
    ) -> StartedRun:
        """An executor starts a run (holding `lease` on it): the agent becomes working, unless
        its project's limits refuse the run (QuotaExceeded, before anything is recorded). Starting
        the same run twice (a retried call) counts it once. With the agent, its spec's revision
        now (an executor holding a spec of another revision resolves it again): with a session,
        the spec of the version the session's runs of the agent use (`versions.session_version`);
        and what is left of its project's budgets."""
        raise_if(required("agent_id", agent_id) + required("run_id", run_id))
        now = self._now()
        budget = RunBudget()
        if self._quotas is not None:
            owner_id = None if principal.is_superuser else principal.user_id
            async with self._store.read() as tx:
                load = await tx.project_run_load(
                    agent_id, run_id, owner_id=owner_id, day=now.date().isoformat()
                )
            if load is not None:  # else refused below, as for any agent not there
                budget = await self._quotas.admit_run(load, now)
        change = await self._store.start_run(_visibility(principal), agent_id, run_id, now, lease=lease)
        if change is None:
            raise AgentNotFound("agent not found")
        if not change.changed:
            run_started(change.agent, now)  # raises when paused or terminated; else a retried start
        if not session_id:
            revision = spec_revision(change.agent, change.project_updated_at, change.type_updated_at)
            return StartedRun(change.agent, revision, budget)
        agent, agent_type = as_of(
            change.agent, await session_version(self._store, change.agent, session_id, now)
        )
        revision = spec_revision(agent, change.project_updated_at, agent_type.updated_at)
        return StartedRun(change.agent, revision, budget)

    async def finish_run(self, principal: Principal, run: FinishedRun) -> Agent:
        """An executor finished a run: its usage is added to the agent's counters and its model
        calls to the cost ledger, and the agent is idle again when no run is left (unless paused
        or terminated meanwhile). Finishing a run that is not in flight (a retried call) changes
        no counter, and adds no ledger entry twice. A run parked on it (its caller, waiting while
        it waited for a person) goes on (`_release`)."""
        change = await self._finish(principal, run, record=True)
        if change.changed and run.tokens_used:
            await self._add_tokens({change.agent.project_id: run.tokens_used})
        await self._release([run.run_id])
        return change.agent

    async def _add_tokens(self, tokens: dict[str, int]) -> None:
        """Counts finished runs' tokens to their projects' day (UTC), for `tokens_per_day`. Apart
        from the run's finish (which stays one statement): a failure here loses the count, never
        the finish."""
        async with self._store.write() as tx:
            await tx.add_project_tokens(tokens, self._now().date().isoformat())

    async def finish_runs(
        self, principal: Principal, runs: Sequence[FinishedRun]
    ) -> list[Agent | DomainError]:
        """Several `finish_run`s, each on its own: the agent after each run, or why it was refused.
        Their ledger entries are written together, after them."""
        if len(runs) > MAX_FINISHED_RUNS:
            too_many = f"must hold at most {MAX_FINISHED_RUNS} runs, not {len(runs)}"
            raise_if([FieldViolation("runs", too_many)])
        results: list[Agent | DomainError] = []
        tokens: dict[str, int] = {}
        entries: list[UsageEntry] = []
        for run in runs:
            try:
                change = await self._finish(principal, run, record=False)
            except DomainError as error:
                results.append(error)
            else:
                results.append(change.agent)
                entries.extend(ledger_entries(change.agent, run, self._now()))
                if change.changed and run.tokens_used:
                    project_id = change.agent.project_id
                    tokens[project_id] = tokens.get(project_id, 0) + run.tokens_used
        await self._store.usage.record(entries)
        if tokens:  # one write for the batch
            await self._add_tokens(tokens)
        await self._release(
            [run.run_id for run, result in zip(runs, results, strict=True) if isinstance(result, Agent)]
        )
        return results

    async def _release(self, run_ids: list[str]) -> None:
        """The runs parked on these runs, which ended, wait on them no more: one left waiting on
        nothing is due, and the watching executors are told so at once (`runs_ready`)."""
        if await self._store.input_requests.release_waits(run_ids, self._now()) and self._watch is not None:
            self._watch.runs_ready()

    async def _finish(self, principal: Principal, run: FinishedRun, *, record: bool) -> RunChange:
        violations = required("agent_id", run.agent_id) + required("run_id", run.run_id)
        if run.tokens_used < 0:
            violations.append(FieldViolation("tokens_used", "must not be negative"))
        if run.cost < 0:
            violations.append(FieldViolation("cost", "must not be negative"))
        if run.cancelled and run.completed:
            violations.append(FieldViolation("cancelled", "a completed run was not cancelled"))
        raise_if(violations + report_violations(run))
        now = self._now()
        change = await self._store.finish_run(
            _visibility(principal),
            run.agent_id,
            run.run_id,
            now,
            completed=run.completed,
            tokens_used=run.tokens_used,
            cost=run.cost,
            cancelled=run.cancelled,
        )
        if change is None:
            raise AgentNotFound("agent not found")
        if record:
            await self._store.usage.record(ledger_entries(change.agent, run, now))
        return change


def _visibility(principal: Principal) -> Visibility:
    """Who may see an agent (its project's owner, superusers), for the store's run bookkeeping
    statements, which check it in the same statement that records the run."""
    return Visibility(user_id=principal.user_id, everything=principal.is_superuser)
