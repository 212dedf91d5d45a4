"""What a finished run adds to the cost ledger: one entry per model its own calls used, on the UTC
day it ended (`ledger_entries`), once its report is found sound (`report_violations`).

A run's delegations and sub-agents are runs of their own and report their own calls, so a
session's (or a day's, an agent's) entries sum every call of every run of its delegation trees
exactly once: what a chat cost is the sum of its session's entries."""

from __future__ import annotations

from datetime import datetime

from agentmesh.registry.models import Agent, FinishedRun
from agentmesh.registry.usage.models import UsageEntry
from agentmesh.runtime.errors import FieldViolation


def ledger_entries(agent: Agent, run: FinishedRun, now: datetime) -> list[UsageEntry]:
    """The entries of a run of `agent` that ended `now`: one per model its own calls used."""
    return [
        UsageEntry(
            project_id=agent.project_id,
            agent_id=agent.id,
            agent=agent.slug,
            user_id=run.user_id,
            session_id=run.session_id,
            run_id=run.run_id,
            model=report.model,
            day=now.date().isoformat(),
            calls=report.calls,
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
            cached_input_tokens=report.cached_input_tokens,
            cost=report.cost,
            cost_known=report.cost_known,
            recorded_at=now,
        )
        for report in run.model_usage
    ]


def report_violations(run: FinishedRun, field: str = "model_usage") -> list[FieldViolation]:
    """What is wrong with a run's reported model usage: a nameless model, a negative count."""
    violations = []
    for index, report in enumerate(run.model_usage):
        if not report.model:
            violations.append(FieldViolation(f"{field}[{index}].model", "is required"))
        counts = (report.calls, report.input_tokens, report.output_tokens, report.cached_input_tokens)
        if min(counts) < 0 or report.cost < 0:
            violations.append(FieldViolation(f"{field}[{index}]", "must not be negative"))
    return violations
