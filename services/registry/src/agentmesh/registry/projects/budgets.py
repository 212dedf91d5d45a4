"""A project's budgets: what its runs may spend in a UTC day or month, in model tokens (input and
output) and in US dollars of priced calls — the limits `tokens_per_day`, `tokens_per_month`,
`cost_per_day` and `cost_per_month` (docs/usage.md).

What a project spent is what its finished runs' calls add up to: `tokens_per_day` reads the
project's day of tokens (counted at each finish), the others the cost ledger (usage/), which only
the projects that set one are read from, at a run's start. A run is refused while a budget is
spent; one admitted is handed what is left (`RunBudget`), and its executor ends it
`BUDGET_EXCEEDED` once it, with what it delegates, spent that.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from agentmesh.registry.errors import QuotaExceeded
from agentmesh.registry.models import ProjectLimits
from agentmesh.registry.usage.models import UsageDimension
from agentmesh.registry.usage.store import UsageLedgerStore

# The budgets read from the cost ledger (tokens_per_day is read from the project's day of tokens).
LEDGER_BUDGETS = ("tokens_per_month", "cost_per_day", "cost_per_month")


@dataclass(frozen=True)
class ProjectSpending:
    """What a project's finished runs spent today and this month (UTC)."""

    tokens_today: int = 0
    cost_today: float = 0.0
    tokens_this_month: int = 0
    cost_this_month: float = 0.0


@dataclass(frozen=True)
class RunBudget:
    """What is left of a project's budgets, the smallest of each kind (0: no bound)."""

    max_tokens: int = 0
    max_cost: float = 0.0


@dataclass(frozen=True)
class _Budget:
    limit: str
    spent: str  # ProjectSpending's field
    tokens: bool
    monthly: bool


_BUDGETS = (
    _Budget("tokens_per_day", "tokens_today", tokens=True, monthly=False),
    _Budget("cost_per_day", "cost_today", tokens=False, monthly=False),
    _Budget("tokens_per_month", "tokens_this_month", tokens=True, monthly=True),
    _Budget("cost_per_month", "cost_this_month", tokens=False, monthly=True),
)


def reads_ledger(limits: ProjectLimits) -> bool:
    """Whether the limits in force set a budget only the cost ledger counts."""
    return any(getattr(limits, name) for name in LEDGER_BUDGETS)


async def ledger_spending(
    ledger: UsageLedgerStore, project_id: str, today: date, *, tokens_today: int
) -> ProjectSpending:
    """What the ledger holds of the project's month up to `today` (one summary by day)."""
    day = today.isoformat()
    summary = await ledger.summarize(
        project_id, [UsageDimension.DAY], start_day=today.replace(day=1).isoformat(), end_day=day, limit=31
    )
    today_group = next((group for group in summary.groups if group.day == day), None)
    return ProjectSpending(
        tokens_today=tokens_today,
        cost_today=today_group.cost if today_group else 0.0,
        tokens_this_month=summary.total.input_tokens + summary.total.output_tokens,
        cost_this_month=summary.total.cost,
    )


def check_budgets(limits: ProjectLimits, spent: ProjectSpending, *, project_id: str, now: datetime) -> None:
    """Refuses a run (QUOTA_EXCEEDED) of a project that spent a budget in force, told to retry
    when its day or month (UTC) is over."""
    for budget in _BUDGETS:
        allowed, used = getattr(limits, budget.limit), getattr(spent, budget.spent)
        if not allowed or used < allowed:
            continue
        if budget.monthly:
            period, retry, when = "this month", _next_month(now), "next month"
        else:
            period, retry, when = "today", _tomorrow(now), "tomorrow"
        amount = (
            f"{used} of {allowed} tokens used" if budget.tokens else f"${used:.6f} of ${allowed:.6f} spent"
        )
        raise QuotaExceeded(
            f"project limit {budget.limit} reached: {amount} {period} (UTC); retry {when}",
            subject=f"project:{project_id}",
            limit=budget.limit,
            retry_after_seconds=(retry - now).total_seconds(),
        )


def remaining(limits: ProjectLimits, spent: ProjectSpending) -> RunBudget:
    """What a run may still spend of the project's budgets."""
    left = {
        budget: getattr(limits, budget.limit) - getattr(spent, budget.spent)
        for budget in _BUDGETS
        if getattr(limits, budget.limit)
    }
    tokens = [value for budget, value in left.items() if budget.tokens]
    costs = [value for budget, value in left.items() if not budget.tokens]
    # A bound already spent (a retried start is not refused) leaves the least that still bounds.
    return RunBudget(
        max_tokens=max(min(tokens), 1) if tokens else 0,
        max_cost=max(min(costs), 1e-9) if costs else 0.0,
    )


def _tomorrow(now: datetime) -> datetime:
    return datetime.combine(now.date() + timedelta(days=1), time(), tzinfo=UTC)


def _next_month(now: datetime) -> datetime:
    first = now.date().replace(day=1) + timedelta(days=32)
    return datetime.combine(first.replace(day=1), time(), tzinfo=UTC)
