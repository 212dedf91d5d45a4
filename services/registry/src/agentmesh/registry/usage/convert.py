"""Proto ↔ domain for the cost ledger: what executors report of a finished run, and the summaries
the usage API answers with; and agent types' run budgets."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.models import FinishedRun, RunBudget
from agentmesh.registry.usage.models import ModelUsageReport, UsageDimension, UsageGroup, UsageSummary
from agentmesh.registry.v1 import registry_service_pb2 as pb

DIMENSIONS = {
    pb.USAGE_DIMENSION_AGENT: UsageDimension.AGENT,
    pb.USAGE_DIMENSION_USER: UsageDimension.USER,
    pb.USAGE_DIMENSION_MODEL: UsageDimension.MODEL,
    pb.USAGE_DIMENSION_SESSION: UsageDimension.SESSION,
    pb.USAGE_DIMENSION_DAY: UsageDimension.DAY,
}


def finished_run(request: internal_pb.FinishAgentRunRequest) -> FinishedRun:
    return FinishedRun(
        agent_id=request.agent_id,
        run_id=request.run_id,
        completed=request.completed,
        cancelled=request.cancelled,
        tokens_used=request.tokens_used,
        cost=request.cost,
        session_id=request.session_id,
        user_id=request.user_id,
        model_usage=tuple(
            ModelUsageReport(
                model=report.model,
                calls=report.calls,
                input_tokens=report.usage.input_tokens,
                output_tokens=report.usage.output_tokens,
                cached_input_tokens=report.usage.cached_input_tokens,
                cost=report.usage.cost,
                cost_known=report.usage.cost_known,
            )
            for report in request.model_usage
        ),
    )


def usage_group_message(group: UsageGroup) -> pb.UsageGroup:
    return pb.UsageGroup(
        agent_id=group.agent_id,
        agent=group.agent,
        user_id=group.user_id,
        model=group.model,
        session_id=group.session_id,
        day=group.day,
        runs=group.runs,
        calls=group.calls,
        usage=run_pb2.Usage(
            input_tokens=group.input_tokens,
            output_tokens=group.output_tokens,
            cached_input_tokens=group.cached_input_tokens,
            cost=group.cost,
            cost_known=not group.unpriced_models,
            unpriced_models=group.unpriced_models,
        ),
    )


def summary_message(summary: UsageSummary) -> pb.SummarizeUsageResponse:
    return pb.SummarizeUsageResponse(
        groups=[usage_group_message(group) for group in summary.groups],
        total=usage_group_message(summary.total),
        truncated=summary.truncated,
    )


def run_budget_message(budget: RunBudget) -> run_pb2.Budget | None:
    """The budget, unset when it bounds nothing (as a type without one was always written)."""
    if not budget.max_tokens and not budget.max_cost:
        return None
    return run_pb2.Budget(max_tokens=budget.max_tokens, max_cost=budget.max_cost)
