"""The rules of project limits (`projects/limits.py`): the limit in force, a project's default
share of the pool, and what counts as raising a limit."""

from __future__ import annotations

import pytest

from agentmesh.registry.errors import LimitRaiseDenied
from agentmesh.registry.models import ProjectLimits
from agentmesh.registry.projects.limits import LimitDefaults, check_limits_change, raises
from agentmesh.runtime.identity import Principal

OWNER = Principal(user_id="owner")
ROOT = Principal(user_id="root", is_superuser=True)


def test_raising_is_going_up_or_to_unlimited_from_a_bound() -> None:
    assert raises(5, 6) and raises(5, 0)
    assert not raises(5, 5) and not raises(5, 1)
    assert not raises(0, 7) and not raises(0, 0)  # nothing is above unlimited


def test_a_project_sets_a_limit_or_takes_the_default_and_the_pool_share() -> None:
    defaults = LimitDefaults(ProjectLimits(tokens_per_day=1000), project_share_of_pool=0.5)
    in_force = defaults.in_force(ProjectLimits(open_streams=3), pool_run_slots=9)
    assert (in_force.open_streams, in_force.tokens_per_day, in_force.requests_per_minute) == (3, 1000, 0)
    assert in_force.concurrent_runs == 4  # half of 9 slots, rounded down
    assert defaults.in_force(ProjectLimits(), pool_run_slots=1).concurrent_runs == 1  # at least one
    assert defaults.in_force(ProjectLimits(), pool_run_slots=0).concurrent_runs == 0  # no pool known
    assert defaults.in_force(ProjectLimits(concurrent_runs=0), pool_run_slots=9).concurrent_runs == 0
    fixed = LimitDefaults(ProjectLimits(concurrent_runs=2), project_share_of_pool=0.5)
    assert fixed.in_force(ProjectLimits(), pool_run_slots=100).concurrent_runs == 2


def test_an_owner_may_lower_a_limit_in_force_but_never_raise_it() -> None:
    defaults = LimitDefaults(ProjectLimits(tokens_per_day=1000), project_share_of_pool=0.5)
    set_ = ProjectLimits(concurrent_runs=4)
    check_limits_change(OWNER, set_, ProjectLimits(concurrent_runs=2), defaults, pool_run_slots=10)
    check_limits_change(OWNER, set_, ProjectLimits(concurrent_runs=4, tokens_per_day=10), defaults)
    # Unset, concurrent_runs would be the pool's share, 5 of 10 slots: above the 4 set now.
    with pytest.raises(LimitRaiseDenied) as denied:
        check_limits_change(OWNER, set_, ProjectLimits(), defaults, pool_run_slots=10)
    assert denied.value.metadata == {"field": "project.limits.concurrent_runs"}
    with pytest.raises(LimitRaiseDenied):
        check_limits_change(OWNER, set_, ProjectLimits(concurrent_runs=4, tokens_per_day=0), defaults)
    check_limits_change(ROOT, set_, ProjectLimits(concurrent_runs=0, tokens_per_day=0), defaults)
