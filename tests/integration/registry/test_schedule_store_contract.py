"""Schedules' claims over every RegistryStore implementation (in memory, SQLite, PostgreSQL), on
a clock the test sets: each due time is claimed once however many claimers race for it; the
missed-run and overlap policies decide what a due time's firing is; what a firer records stays
recorded once final."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from agentmesh.registry.errors import ScheduleNameTaken, ValidationFailed
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.schedules.claims import ScheduleClaims
from agentmesh.registry.schedules.models import Schedule
from agentmesh.registry.schedules.registry import ScheduleRegistry
from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from agentmesh.runtime.identity import Principal
from tests.integration.registry.test_store_contract import T0, _world

START = T0.replace(minute=0, second=0, microsecond=0)  # 03:00 UTC
FIRST_DUE = START + timedelta(minutes=5)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


async def _setup(
    store: RegistryStore, **policies: str
) -> tuple[Clock, ScheduleRegistry, Schedule, Principal, str]:
    owner, _, project, agent = await _world(store)
    clock = Clock()
    schedules = ScheduleRegistry(store, page_tokens=PageTokens("x" * 32), clock=clock)
    principal = Principal(user_id=owner)
    given = Schedule(
        id="",
        project_id=project.id,
        name="every-five",
        agent=agent.slug,
        message="report for {{scheduled_for}}",
        cron="*/5 * * * *",
        created_by="",
        created_at=START,
        **policies,
    )
    schedule = await schedules.create(principal, given)
    return clock, schedules, schedule, principal, agent.id


async def test_due_times_are_claimed_once_by_racing_claimers_and_missed_ones_by_policy(
    registry_store: RegistryStore,
) -> None:
    clock, schedules, schedule, principal, _ = await _setup(registry_store)
    assert schedule.next_fire_at == FIRST_DUE
    claimers = [ScheduleClaims(registry_store, clock=clock) for _ in range(2)]
    assert await claimers[0].claim(FIRST_DUE - timedelta(seconds=1)) == []

    won = []
    for due in (FIRST_DUE, FIRST_DUE + timedelta(minutes=5)):
        results = await asyncio.gather(*(c.claim(due) for c in claimers for _ in range(3)))
        claimed = [firing for result in results for firing in result]
        assert len(claimed) == 1, claimed
        won.append(claimed[0])
        # What the next firing waits for: the previous one's run has ended.
        await claimers[0].record(claimed[0].firing.id, "failed", error="no run in this test")
    assert [c.firing.due_at for c in won] == [FIRST_DUE, FIRST_DUE + timedelta(minutes=5)]
    assert won[0].message == f"report for {FIRST_DUE.isoformat()}"
    assert won[0].project_slug and won[0].creator.id == principal.user_id
    assert won[0].firing.session_id != won[1].firing.session_id  # a new session each time

    history = await schedules.firings(principal, schedule.project_id, schedule.id, page_size=1)
    assert [f.due_at for f in history.items] == [FIRST_DUE + timedelta(minutes=5)]
    second = await schedules.firings(
        principal, schedule.project_id, schedule.id, page_token=history.next_page_token
    )
    assert [(f.due_at, f.outcome) for f in second.items] == [(FIRST_DUE, "failed")]
    assert history.total_size == 2

    bad = schedule.model_copy(
        update={"name": "other", "cron": "61 * * * *", "time_zone": "Mars/Base", "overlap_policy": "maybe"}
    )
    with pytest.raises(ValidationFailed) as error:
        await schedules.create(principal, bad)
    assert {v.field for v in error.value.violations} == {
        "schedule.cron",
        "schedule.time_zone",
        "schedule.overlap_policy",
    }
    with pytest.raises(ScheduleNameTaken):
        await schedules.create(principal, schedule.model_copy(update={"message": "again"}))
    listed = await schedules.list(principal, schedule.project_id)
    assert [s.name for s in listed.items] == ["every-five"]

    # Missed due times (the mesh was down for two hours): skipped, or run once for them all.
    running_once = await schedules.create(
        principal, schedule.model_copy(update={"name": "catch-up", "missed_policy": "run_once"})
    )
    back = FIRST_DUE + timedelta(hours=2, seconds=30)
    claimed = await claimers[0].claim(back)
    assert [(c.schedule.id, c.firing.due_at) for c in claimed] == [(running_once.id, FIRST_DUE)]
    # Both move on to the first due time after now: the missed ones are not claimed one by one.
    assert await claimers[0].claim(back) == []
    for each in (schedule, running_once):
        current = await schedules.get(principal, each.project_id, each.id)
        assert current.next_fire_at == FIRST_DUE + timedelta(hours=2, minutes=5)
    history = await schedules.firings(principal, schedule.project_id, schedule.id)
    assert (history.items[0].due_at, history.items[0].outcome) == (
        FIRST_DUE + timedelta(minutes=10),
        "skipped_missed",
    )


async def test_overlap_policies_while_the_previous_run_is_in_flight(registry_store: RegistryStore) -> None:
    clock, schedules, first_schedule, principal, agent_id = await _setup(registry_store)
    by_policy = {"skip": first_schedule}
    for overlap in ("queue", "cancel_previous"):
        given = first_schedule.model_copy(
            update={"name": overlap.replace("_", "-"), "overlap_policy": overlap}
        )
        by_policy[overlap] = await schedules.create(principal, given)
    claims = ScheduleClaims(registry_store, clock=clock)
    visible = Visibility(principal.user_id, everything=False)
    firsts = {c.schedule.overlap_policy: c for c in await claims.claim(FIRST_DUE)}
    for overlap, first in firsts.items():
        lease = RunLease(first.firing.session_id, "executor-1", FIRST_DUE + timedelta(hours=1))
        await registry_store.start_run(visible, agent_id, f"run-{overlap}", FIRST_DUE, lease=lease)
        await registry_store.leases.take_turn(first.firing.session_id, (agent_id, f"run-{overlap}"))
        await claims.record(first.firing.id, "running", run_id=f"run-{overlap}")

    second_due = FIRST_DUE + timedelta(minutes=5)
    second = await claims.claim(second_due)
    assert [c.schedule.overlap_policy for c in second] == ["cancel_previous"]

    async def outcomes(overlap: str) -> list[tuple[datetime, str]]:
        schedule = by_policy[overlap]
        history = await schedules.firings(principal, schedule.project_id, schedule.id)
        return [(f.due_at, f.outcome) for f in history.items]

    assert await outcomes("skip") == [(second_due, "skipped_overlap"), (FIRST_DUE, "running")]
    assert await outcomes("queue") == [(second_due, "queued"), (FIRST_DUE, "running")]
    assert await outcomes("cancel_previous") == [(second_due, "pending"), (FIRST_DUE, "cancelled")]
    assert await registry_store.leases.interrupted("executor-1") == [(agent_id, "run-cancel_previous")]
    # The cancelled firing's run reports its end: the firing stays cancelled.
    await claims.record(firsts["cancel_previous"].firing.id, "failed")
    assert (await outcomes("cancel_previous"))[1] == (FIRST_DUE, "cancelled")

    # The queued firing goes once the run before it has ended.
    await registry_store.finish_run(
        visible, agent_id, "run-queue", second_due, completed=True, tokens_used=0, cost=0
    )
    await claims.record(firsts["queue"].firing.id, "completed")
    released = await claims.claim(second_due + timedelta(seconds=1))
    assert [(c.schedule.overlap_policy, c.firing.due_at) for c in released] == [("queue", second_due)]
