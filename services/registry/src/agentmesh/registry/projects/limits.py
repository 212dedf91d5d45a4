"""A project's limits (DESIGN §12): what one project may use of the mesh, so one tenant cannot
take it from the others.

A project sets each limit or leaves it unset; unset, the operator's default applies (registry
settings `AGENTMESH_REGISTRY_DEFAULT_*`); 0, set or defaulted, is unlimited. Only superusers
raise a limit: an owner may lower one (a value under the one in force), never raise it or make it
unlimited. The one default that is not a fixed number is `concurrent_runs`: unless the operator
fixes one, a project may run at most its share of the executor pool's run slots at once
(`project_share_of_pool`), so one tenant cannot take every executor slot while others wait.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from agentmesh.registry.errors import LimitRaiseDenied, QuotaExceeded
from agentmesh.registry.models import LIMIT_NAMES, ProjectLimits
from agentmesh.registry.projects.budgets import (
    ProjectSpending,
    RunBudget,
    check_budgets,
    ledger_spending,
    reads_ledger,
    remaining,
)
from agentmesh.registry.projects.store import ProjectRunLoad
from agentmesh.registry.usage.store import UsageLedgerStore
from agentmesh.runtime.identity import Principal

# What a run refused for its project's runs at once is told to wait: runs end at any moment.
RUN_SLOT_RETRY_SECONDS = 1


@dataclass(frozen=True)
class LimitDefaults:
    """The operator's limits for projects that set none (0: unlimited), and the share of the
    executor pool's run slots a project may hold when no fixed `concurrent_runs` is given."""

    limits: ProjectLimits
    project_share_of_pool: float = 0.0  # 0: no share of the pool is enforced

    def in_force(self, limits: ProjectLimits, *, pool_run_slots: int = 0) -> ProjectLimits:
        """Every limit as it applies to a project that sets `limits` (0: unlimited), with the
        pool's run slots now (0 when unknown: no share of the pool is enforced)."""
        values = {name: limit(limits, self.limits, name) for name in LIMIT_NAMES}
        shared = pool_run_slots and self.project_share_of_pool > 0
        if limits.concurrent_runs is None and not self.limits.concurrent_runs and shared:
            values["concurrent_runs"] = max(1, math.floor(pool_run_slots * self.project_share_of_pool))
        return ProjectLimits(**values)


class ProjectQuotas:
    """The limits in force now (the operator's defaults, the pool's run slots) and the refusals of
    what would go over them."""

    def __init__(
        self,
        defaults: LimitDefaults,
        *,
        pool_run_slots: Callable[[], Awaitable[int]] | None = None,
        ledger: UsageLedgerStore | None = None,
    ) -> None:
        self.defaults = defaults
        self._pool_run_slots = pool_run_slots
        self._ledger = ledger  # what the cost-ledger budgets count; None: they are not enforced

    async def pool_run_slots(self) -> int:
        return await self._pool_run_slots() if self._pool_run_slots else 0

    async def in_force(self, limits: ProjectLimits) -> ProjectLimits:
        return self.defaults.in_force(limits, pool_run_slots=await self.pool_run_slots())

    async def admit_run(self, load: ProjectRunLoad, now: datetime) -> RunBudget:
        """Refuses a run of a project that spent a budget (projects/budgets.py), or that would
        take it past its runs at once (a retried start of a run in flight is no new run); else
        what is left of its budgets, for the run. The counts are the registry's own, read once
        before the start: starts racing in that instant may each see the last free slot, and runs
        in flight count their spending only once they end."""
        limits = await self.in_force(load.limits)
        spent = ProjectSpending(tokens_today=load.tokens_today)
        if self._ledger is not None and reads_ledger(limits):
            spent = await ledger_spending(
                self._ledger, load.project_id, now.date(), tokens_today=load.tokens_today
            )
        if not load.started:
            check_budgets(limits, spent, project_id=load.project_id, now=now)
            allowed = limits.concurrent_runs
            if allowed and load.runs_in_flight >= allowed:
                raise QuotaExceeded(
                    f"project limit concurrent_runs reached: {load.runs_in_flight} of {allowed} runs in "
                    f"flight; retry when one ends",
                    subject=f"project:{load.project_id}",
                    limit="concurrent_runs",
                    retry_after_seconds=RUN_SLOT_RETRY_SECONDS,
                )
        return remaining(limits, spent)

    async def check_change(self, principal: Principal, before: ProjectLimits, after: ProjectLimits) -> None:
        """`check_limits_change` with the pool's run slots now."""
        if principal.is_superuser or before == after:
            return
        check_limits_change(
            principal, before, after, self.defaults, pool_run_slots=await self.pool_run_slots()
        )


def limit(limits: ProjectLimits, defaults: ProjectLimits, name: str) -> int:
    """One limit as the project sets it, else the default; 0 is unlimited."""
    value = getattr(limits, name)
    if value is None:
        value = getattr(defaults, name)
    return value or 0


def check_limits_change(
    principal: Principal,
    before: ProjectLimits,
    after: ProjectLimits,
    defaults: LimitDefaults,
    *,
    pool_run_slots: int = 0,
) -> None:
    """Refuses a change of a project's limits that raises one, unless a superuser makes it. What
    counts is the limit in force before and after (a default included): an owner may set a limit
    under the default, or unset one that is over it, but never go above what applies now."""
    if principal.is_superuser:
        return
    old_limits = defaults.in_force(before, pool_run_slots=pool_run_slots)
    new_limits = defaults.in_force(after, pool_run_slots=pool_run_slots)
    for name in LIMIT_NAMES:
        old, new = getattr(old_limits, name), getattr(new_limits, name)
        if raises(old, new):
            raise LimitRaiseDenied(f"project.limits.{name}", old, new)


def raises(before: int, after: int) -> bool:
    """Whether going from limit `before` to `after` raises it (0 is unlimited)."""
    if before == 0:
        return False
    return after == 0 or after > before
