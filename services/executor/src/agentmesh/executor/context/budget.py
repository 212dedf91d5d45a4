"""A run's budget (RunRequest.budget: the chat's, less what its caller's tree had spent when it
delegated): checked before each model call against what the run and the runs below it have
spent, and handed down, less that, to each run it delegates to."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.scope import RunFailure, RunScope
from agentmesh.executor.errors import BUDGET_EXCEEDED


def check_budget(scope: RunScope) -> None:
    """Raises RunFailure (RESOURCE_EXHAUSTED, BUDGET_EXCEEDED) once the run's tree has spent its
    budget: a model call is never started past it. Only priced calls count towards a cost."""
    if not scope.request.HasField("budget"):
        return
    budget, spent = scope.request.budget, scope.meter.tree
    if budget.max_tokens and spent.total_tokens >= budget.max_tokens:
        over = f"{spent.total_tokens} of its {budget.max_tokens} tokens"
    elif budget.max_cost and spent.cost >= budget.max_cost:
        over = f"${spent.cost:.6f} of its ${budget.max_cost:.6f}"
    else:
        return
    raise RunFailure("RESOURCE_EXHAUSTED", f"the run's budget is spent ({over})", reason=BUDGET_EXCEEDED)


def remaining_budget(scope: RunScope) -> run_pb2.Budget | None:
    """What a run delegated now may spend: the budget less what the tree has spent (None: no
    budget). A spent budget fails the delegating run instead (check_budget): nothing is started
    past it."""
    if not scope.request.HasField("budget"):
        return None
    check_budget(scope)
    budget, spent = scope.request.budget, scope.meter.tree
    remaining = run_pb2.Budget()
    if budget.max_tokens:
        remaining.max_tokens = budget.max_tokens - spent.total_tokens
    if budget.max_cost:
        remaining.max_cost = budget.max_cost - spent.cost
    return remaining
