"""Schedules as a registry resource: a project's owner names an agent of the project, a message,
a five-field cron expression read in an IANA time zone, and what happens to a session (`new` one
per firing, or `continue` the one the schedule owns), to missed due times (`skip` them, or
`run_once` for them) and to a firing whose previous run is still going (`skip`, `queue`,
`cancel_previous`). The registry keeps each schedule's next fire time; firing is `claims.py`'s.

Every field is checked before anything is written, and a bad one is named (`schedule.cron`,
`schedule.time_zone`, …), so nothing is stored half-way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from agentmesh.registry.clock import Clock
from agentmesh.registry.errors import ScheduleDisabled, ScheduleNotFound, ValidationFailed
from agentmesh.registry.models import Page
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.schedules.models import (
    MISSED_POLICIES,
    OVERLAP_POLICIES,
    SESSION_POLICIES,
    Schedule,
    ScheduleFiring,
)
from agentmesh.registry.schedules.timing import cron_problem, next_fire_at, time_zone
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.validation import DNS_LABEL_RULE, is_dns_label, update_paths
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

MAX_MESSAGE_BYTES = 32 * 1024
# What UpdateSchedule may change (the id, project, creator and times are the registry's).
UPDATABLE = (
    "name",
    "agent",
    "message",
    "cron",
    "time_zone",
    "session_policy",
    "missed_policy",
    "overlap_policy",
    "enabled",
)


def session_for(schedule_id: str) -> str:
    """The session a `continue` schedule owns (a name the gateway's chats accept)."""
    return f"schedule-{schedule_id}"


class ScheduleRegistry:
    """Creates, reads, updates and deletes a project's schedules (its owner or superusers), makes
    one due now, and lists its firings."""

    def __init__(self, store: RegistryStore, *, page_tokens: PageTokens, clock: Clock) -> None:
        self._store = store
        self._pages = page_tokens
        self._clock = clock

    async def create(self, principal: Principal, given: Schedule) -> Schedule:
        schedule_id = str(uuid.uuid4())
        schedule = given.model_copy(
            update={
                "id": schedule_id,
                "created_by": principal.user_id,
                "created_at": self._clock(),
                "session_id": session_for(schedule_id) if given.session_policy == "continue" else "",
            }
        )
        _check(schedule)
        async with self._store.write() as tx:
            await self._project(tx, principal, schedule.project_id)
            await _check_agent(tx, schedule)
            return await tx.insert_schedule(self._timed(schedule))

    async def get(self, principal: Principal, project_id: str, schedule_id: str) -> Schedule:
        async with self._store.read() as tx:
            await self._project(tx, principal, project_id)
            return await _found(tx, project_id, schedule_id)

    async def list(
        self,
        principal: Principal,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[Schedule]:
        """One page of the project's schedules, oldest first (the registry's paging)."""
        scope = f"schedules:{project_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await self._project(tx, principal, project_id)
            found = await tx.list_schedules(project_id, request)
        return self._pages.page(found, scope=scope)

    async def update(self, principal: Principal, given: Schedule, mask: Iterable[str]) -> Schedule:
        """Changes the fields `mask` names to `given`'s values; the next fire time follows a
        changed cron expression, time zone or enabled flag (counted from now)."""
        paths, violations = update_paths(mask, UPDATABLE)
        if not given.id:
            violations.insert(0, FieldViolation("schedule.id", "is required"))
        if violations:
            raise ValidationFailed.of(violations)
        async with self._store.write() as tx:
            await self._project(tx, principal, given.project_id)
            current = await _found(tx, given.project_id, given.id)
            updated = current.model_copy(update={path: getattr(given, path) for path in paths})
            if updated.session_policy == "continue" and not updated.session_id:
                updated = updated.model_copy(update={"session_id": session_for(updated.id)})
            _check(updated)
            if updated.agent != current.agent:
                await _check_agent(tx, updated)
            if {"cron", "time_zone", "enabled"} & set(paths):
                updated = self._timed(updated)
            return await tx.update_schedule(updated)

    async def delete(self, principal: Principal, project_id: str, schedule_id: str) -> None:
        async with self._store.write() as tx:
            await self._project(tx, principal, project_id)
            await _found(tx, project_id, schedule_id)
            await tx.delete_schedule(schedule_id)

    async def run_now(self, principal: Principal, project_id: str, schedule_id: str) -> Schedule:
        """Makes the schedule due now: the next firer's pass fires it, under its policies."""
        async with self._store.write() as tx:
            await self._project(tx, principal, project_id)
            current = await _found(tx, project_id, schedule_id)
            if not current.enabled:
                raise ScheduleDisabled("the schedule is disabled: enable it first")
            return await tx.update_schedule(current.model_copy(update={"next_fire_at": self._clock()}))

    async def firings(
        self,
        principal: Principal,
        project_id: str,
        schedule_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[ScheduleFiring]:
        """One page of the schedule's firings, newest first."""
        scope = f"schedule_firings:{schedule_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await self._project(tx, principal, project_id)
            await _found(tx, project_id, schedule_id)
            found = await tx.list_firings(schedule_id, request)
        token = ""
        if found.has_more and found.items:
            token = self._pages.token((found.items[-1].due_at, found.items[-1].id), scope=scope)
        return Page(items=found.items, next_page_token=token, total_size=found.total)

    def _timed(self, schedule: Schedule) -> Schedule:
        due = (
            next_fire_at(schedule.cron, schedule.time_zone, after=self._clock()) if schedule.enabled else None
        )
        return schedule.model_copy(update={"next_fire_at": due})

    async def _project(self, tx: StoreTransaction, principal: Principal, project_id: str) -> None:
        if not project_id:
            raise ValidationFailed.of([FieldViolation("project_id", "is required")])
        await visible_project(tx, principal, project_id)


async def _found(tx: StoreTransaction, project_id: str, schedule_id: str) -> Schedule:
    schedule = await tx.get_schedule(schedule_id, project_id=project_id) if schedule_id else None
    if schedule is None:
        raise ScheduleNotFound("schedule not found")
    return schedule


async def _check_agent(tx: StoreTransaction, schedule: Schedule) -> None:
    if await tx.get_agent(project_ref=(schedule.project_id, schedule.agent)) is None:
        raise ValidationFailed.of(
            [FieldViolation("schedule.agent", "no agent of this project has that name")]
        )


def _check(schedule: Schedule) -> None:
    violations = schedule_violations(
        name=schedule.name,
        agent=schedule.agent,
        message=schedule.message,
        cron=schedule.cron,
        time_zone_name=schedule.time_zone,
        session_policy=schedule.session_policy,
        missed_policy=schedule.missed_policy,
        overlap_policy=schedule.overlap_policy,
    )
    if violations:
        raise ValidationFailed.of(violations)


def schedule_violations(
    *,
    name: str,
    agent: str,
    message: str,
    cron: str,
    time_zone_name: str,
    session_policy: str,
    missed_policy: str,
    overlap_policy: str,
    prefix: str = "schedule",
) -> list[FieldViolation]:
    """What is wrong with a schedule's fields, each named (`agentmesh apply` checks the same
    before it writes)."""
    violations: list[FieldViolation] = []
    if not is_dns_label(name):
        violations.append(FieldViolation(f"{prefix}.name", DNS_LABEL_RULE))
    if not agent:
        violations.append(FieldViolation(f"{prefix}.agent", "is required"))
    if not message.strip():
        violations.append(FieldViolation(f"{prefix}.message", "is required"))
    elif len(message.encode()) > MAX_MESSAGE_BYTES:
        violations.append(FieldViolation(f"{prefix}.message", f"at most {MAX_MESSAGE_BYTES} bytes"))
    if problem := cron_problem(cron):
        violations.append(FieldViolation(f"{prefix}.cron", problem))
    if time_zone(time_zone_name) is None:
        violations.append(
            FieldViolation(f"{prefix}.time_zone", "must be an IANA time zone, e.g. Europe/Paris")
        )
    for field, value, allowed in (
        ("session_policy", session_policy, SESSION_POLICIES),
        ("missed_policy", missed_policy, MISSED_POLICIES),
        ("overlap_policy", overlap_policy, OVERLAP_POLICIES),
    ):
        if value not in allowed:
            violations.append(FieldViolation(f"{prefix}.{field}", f"must be one of {', '.join(allowed)}"))
    return violations
