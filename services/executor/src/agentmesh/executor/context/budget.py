"""A run's budget: the chat's (RunRequest.budget, less what its caller's tree had spent when it
delegated, and tightened at the run's start to what is left of its project's budgets) and its
agent type's run budget (AgentSpec.run_budget), the smaller of each bound counting. Checked
before each model step against what the run and the runs below it have spent, and handed down,
less that, to each run it delegates to."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.scope import RunFailure, RunScope
from agentmesh.executor.errors import BUDGET_EXCEEDED


def _bounds(scope: RunScope) -> tuple[int, float]:
    """The run's most tokens and most US dollars (0: no bound)."""
    budgets = [b for b in (scope.request.budget, scope.spec.run_budget) if b.max_tokens or b.max_cost]
    tokens = [b.max_tokens for b in budgets if b.max_tokens]
    costs = [b.max_cost for b in budgets if b.max_cost]
    return min(tokens, default=0), min(costs, default=0.0)


def check_budget(scope: RunScope) -> None:
    """Raises RunFailure (RESOURCE_EXHAUSTED, BUDGET_EXCEEDED) once the run's tree has spent its
    budget: no model step starts past it. Only priced calls count towards a cost."""
    max_tokens, max_cost = _bounds(scope)
    spent = scope.meter.tree
    if max_tokens and spent.total_tokens >= max_tokens:
        over = f"{spent.total_tokens} of its {max_tokens} tokens"
    elif max_cost and spent.cost >= max_cost:
        over = f"${spent.cost:.6f} of its ${max_cost:.6f}"
    else:
        return
    raise RunFailure("RESOURCE_EXHAUSTED", f"the run's budget is spent ({over})", reason=BUDGET_EXCEEDED)


def remaining_budget(scope: RunScope) -> run_pb2.Budget | None:
    """What a run delegated now may spend: the budget less what the tree has spent (None: no
    budget). A spent budget fails the delegating run instead (check_budget): nothing is started
    past it."""
    max_tokens, max_cost = _bounds(scope)
    if not max_tokens and not max_cost:
        return None
    check_budget(scope)
    spent = scope.meter.tree
    remaining = run_pb2.Budget()
    if max_tokens:
        remaining.max_tokens = max_tokens - spent.total_tokens
    if max_cost:
        remaining.max_cost = max_cost - spent.cost
    return remaining


def tighten(budget: run_pb2.Budget, bound: run_pb2.Budget) -> None:
    """Lowers each of `budget`'s bounds to `bound`'s where that is smaller (0: no bound)."""
    if bound.max_tokens and (not budget.max_tokens or bound.max_tokens < budget.max_tokens):
        budget.max_tokens = bound.max_tokens
    if bound.max_cost and (not budget.max_cost or bound.max_cost < budget.max_cost):
        budget.max_cost = bound.max_cost
