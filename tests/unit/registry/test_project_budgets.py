"""The rules of a project's budgets (`projects/budgets.py`): a run is refused while one is spent,
told to retry when its day or month is over, and otherwise handed what is left of them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentmesh.registry.errors import QuotaExceeded
from agentmesh.registry.models import ProjectLimits
from agentmesh.registry.projects.budgets import ProjectSpending, RunBudget, check_budgets, remaining

NOW = datetime(2026, 12, 31, 18, 0, tzinfo=UTC)


def test_what_is_left_is_the_smallest_of_each_kind() -> None:
    limits = ProjectLimits(tokens_per_day=1000, tokens_per_month=5000, cost_per_day=2.0, cost_per_month=1.5)
    spent = ProjectSpending(tokens_today=300, cost_today=0.5, tokens_this_month=4500, cost_this_month=1.0)
    assert remaining(limits, spent) == RunBudget(max_tokens=500, max_cost=0.5)
    assert remaining(ProjectLimits(), spent) == RunBudget()  # no budget: no bound


@pytest.mark.parametrize(
    ("limits", "spent", "limit", "retry_seconds"),
    [
        (ProjectLimits(cost_per_day=1.0), ProjectSpending(cost_today=1.0), "cost_per_day", 6 * 3600),
        (
            ProjectLimits(tokens_per_month=10),
            ProjectSpending(tokens_this_month=11),
            "tokens_per_month",
            6 * 3600,
        ),
        (ProjectLimits(cost_per_month=3.0), ProjectSpending(cost_this_month=3.5), "cost_per_month", 6 * 3600),
    ],
)
def test_a_spent_budget_refuses_the_run_until_its_period_is_over(
    limits: ProjectLimits, spent: ProjectSpending, limit: str, retry_seconds: int
) -> None:
    with pytest.raises(QuotaExceeded) as refused:
        check_budgets(limits, spent, project_id="p", now=NOW)
    assert refused.value.metadata["quota_limit"] == limit
    assert refused.value.retry_after_seconds == retry_seconds  # the last day of the year, 18:00
    check_budgets(limits, ProjectSpending(), project_id="p", now=NOW)  # nothing spent: admitted


def test_a_monthly_budget_waits_for_the_first_of_the_next_month() -> None:
    mid_month = datetime(2026, 2, 10, tzinfo=UTC)
    with pytest.raises(QuotaExceeded) as refused:
        check_budgets(
            ProjectLimits(tokens_per_month=1),
            ProjectSpending(tokens_this_month=1),
            project_id="p",
            now=mid_month,
        )
    assert refused.value.retry_after_seconds == 19 * 24 * 3600  # to March 1st
