"""Storing schedules and their firings: the transaction methods (`ScheduleTransaction`, part of
every `StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. A schedule is unique by (`project_id`, `name`), a firing by (`schedule_id`,
`due_at`).

`advance_schedule` is what makes firing exactly-once: it moves a schedule's next fire time on only
if it still is the due time its caller read, so of two claimers of one due time one changes the row
and the other finds it moved (PostgreSQL re-checks the condition after the first commits; SQLite
and the in-memory store serialize write transactions)."""

from __future__ import annotations

import abc
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.errors import ScheduleNameTaken
from agentmesh.registry.in_memory_state import SessionTurn, State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import PageRequest, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.schedules.models import OPEN, QUEUED, Schedule, ScheduleFiring
from agentmesh.registry.tables import AgentRunRow, ScheduleFiringRow, ScheduleRow, SessionTurnRow


class ScheduleTransaction(abc.ABC):
    """The schedule operations of one transaction. Reads return None for what does not exist; a
    taken name raises ScheduleNameTaken."""

    @abc.abstractmethod
    async def insert_schedule(self, schedule: Schedule) -> Schedule: ...

    @abc.abstractmethod
    async def get_schedule(self, schedule_id: str, *, project_id: str | None = None) -> Schedule | None:
        """The schedule of that id (in that project, when given)."""

    @abc.abstractmethod
    async def get_schedule_by_name(self, project_id: str, name: str) -> Schedule | None: ...

    @abc.abstractmethod
    async def list_schedules(self, project_id: str, page: PageRequest) -> Slice[Schedule]:
        """One page of the project's schedules in (`created_at`, `id`) order."""

    @abc.abstractmethod
    async def update_schedule(self, schedule: Schedule) -> Schedule: ...

    @abc.abstractmethod
    async def delete_schedule(self, schedule_id: str) -> None:
        """The schedule and its firings."""

    @abc.abstractmethod
    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Enabled schedules whose next fire time is at or before `now`, earliest first."""

    @abc.abstractmethod
    async def advance_schedule(self, schedule_id: str, due_at: datetime, next_fire_at: datetime) -> bool:
        """Moves the schedule's next fire time from `due_at` to `next_fire_at`; False (and nothing
        changed) when it no longer is `due_at` or the schedule is disabled or gone."""

    @abc.abstractmethod
    async def insert_firing(self, firing: ScheduleFiring) -> ScheduleFiring: ...

    @abc.abstractmethod
    async def get_firing(self, firing_id: str) -> ScheduleFiring | None: ...

    @abc.abstractmethod
    async def update_firing(self, firing: ScheduleFiring, *, outcome_was: str) -> bool:
        """Replaces the firing if its outcome still is `outcome_was`; whether it did."""

    @abc.abstractmethod
    async def list_firings(self, schedule_id: str, page: PageRequest) -> Slice[ScheduleFiring]:
        """One page of the schedule's firings, newest due time first (`page.after` is the last
        (due_at, id) seen)."""

    @abc.abstractmethod
    async def open_firings(self, schedule_id: str) -> list[ScheduleFiring]:
        """The schedule's firings still pending, queued or running, oldest due time first."""

    @abc.abstractmethod
    async def schedules_with_queued_firings(self, limit: int) -> list[str]: ...

    @abc.abstractmethod
    async def run_in_flight(self, run_id: str) -> bool:
        """Whether a run of that id is in flight (started and not finished)."""

    @abc.abstractmethod
    async def interrupt_run(self, run_id: str) -> None:
        """Marks the run's session turn interrupted: its executor cancels it at its next lease
        renewal, as when a newer message interrupts it."""


def name_taken(name: str) -> ScheduleNameTaken:
    return ScheduleNameTaken(f"a schedule named {name!r} exists in this project")


class SqlSchedules(ScheduleTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers it uses."""

    _session: AsyncSession

    async def insert_schedule(self, schedule: Schedule) -> Schedule:
        await self._insert(ScheduleRow(**schedule.model_dump()), {"name": name_taken(schedule.name)})  # type: ignore[attr-defined]
        return schedule

    async def get_schedule(self, schedule_id: str, *, project_id: str | None = None) -> Schedule | None:
        statement = sa.select(ScheduleRow).where(ScheduleRow.id == schedule_id)
        if project_id is not None:
            statement = statement.where(ScheduleRow.project_id == project_id)
        row = await self._one(statement, False)  # type: ignore[attr-defined]
        return from_row(Schedule, row) if row else None

    async def get_schedule_by_name(self, project_id: str, name: str) -> Schedule | None:
        statement = sa.select(ScheduleRow).where(
            ScheduleRow.project_id == project_id, ScheduleRow.name == name
        )
        row = await self._one(statement, False)  # type: ignore[attr-defined]
        return from_row(Schedule, row) if row else None

    async def list_schedules(self, project_id: str, page: PageRequest) -> Slice[Schedule]:
        return await self._slice(ScheduleRow, [ScheduleRow.project_id == project_id], page, Schedule)  # type: ignore[attr-defined,no-any-return]

    async def update_schedule(self, schedule: Schedule) -> Schedule:
        await self._update(
            ScheduleRow, schedule.id, schedule.model_dump(), {"name": name_taken(schedule.name)}
        )  # type: ignore[attr-defined]
        return schedule

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._session.execute(
            sa.delete(ScheduleFiringRow).where(ScheduleFiringRow.schedule_id == schedule_id)
        )
        await self._session.execute(sa.delete(ScheduleRow).where(ScheduleRow.id == schedule_id))

    async def delete_project_schedules(self, project_id: str) -> None:
        """With its project: a project's schedules and their firings go."""
        ids = sa.select(ScheduleRow.id).where(ScheduleRow.project_id == project_id)
        await self._session.execute(
            sa.delete(ScheduleFiringRow).where(ScheduleFiringRow.schedule_id.in_(ids))
        )
        await self._session.execute(sa.delete(ScheduleRow).where(ScheduleRow.project_id == project_id))

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        statement = (
            sa.select(ScheduleRow)
            .where(ScheduleRow.enabled, ScheduleRow.next_fire_at <= now)
            .order_by(ScheduleRow.next_fire_at, ScheduleRow.id)
            .limit(limit)
        )
        return [from_row(Schedule, row) for row in (await self._session.execute(statement)).scalars()]

    async def advance_schedule(self, schedule_id: str, due_at: datetime, next_fire_at: datetime) -> bool:
        result = await self._session.execute(
            sa.update(ScheduleRow)
            .where(ScheduleRow.id == schedule_id, ScheduleRow.enabled, ScheduleRow.next_fire_at == due_at)
            .values(next_fire_at=next_fire_at)
        )
        return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]

    async def insert_firing(self, firing: ScheduleFiring) -> ScheduleFiring:
        await self._insert(ScheduleFiringRow(**firing.model_dump()), {})  # type: ignore[attr-defined]
        return firing

    async def get_firing(self, firing_id: str) -> ScheduleFiring | None:
        row = await self._session.get(ScheduleFiringRow, firing_id)
        return from_row(ScheduleFiring, row) if row else None

    async def update_firing(self, firing: ScheduleFiring, *, outcome_was: str) -> bool:
        result = await self._session.execute(
            sa.update(ScheduleFiringRow)
            .where(ScheduleFiringRow.id == firing.id, ScheduleFiringRow.outcome == outcome_was)
            .values(**firing.model_dump(exclude={"id"}))
        )
        return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]

    async def list_firings(self, schedule_id: str, page: PageRequest) -> Slice[ScheduleFiring]:
        row = ScheduleFiringRow
        conditions = [row.schedule_id == schedule_id]
        total = await self._session.scalar(sa.select(sa.func.count()).select_from(row).where(*conditions))
        newest_first = (row.due_at.desc(), row.id.desc())
        after = page.after
        if after is None and page.skip:
            # A page number becomes its keyset boundary: the last key of the items before it.
            head = sa.select(row.due_at, row.id).where(*conditions).order_by(*newest_first).limit(page.skip)
            last = head.subquery()
            found = (await self._session.execute(sa.select(*last.c).order_by(*last.c).limit(1))).first()
            after = None if found is None else (found[0], found[1])
        statement = sa.select(row).where(*conditions).order_by(*newest_first)
        if after is not None:
            boundary = sa.tuple_(sa.literal(after[0], row.due_at.type), sa.literal(after[1]))
            statement = statement.where(sa.tuple_(row.due_at, row.id) < boundary)
        rows = list((await self._session.execute(statement.limit(page.size + 1))).scalars())
        items = [from_row(ScheduleFiring, r) for r in rows[: page.size]]
        return Slice(items=items, has_more=len(rows) > page.size, total=total or 0)

    async def open_firings(self, schedule_id: str) -> list[ScheduleFiring]:
        statement = (
            sa.select(ScheduleFiringRow)
            .where(ScheduleFiringRow.schedule_id == schedule_id, ScheduleFiringRow.outcome.in_(OPEN))
            .order_by(ScheduleFiringRow.due_at)
        )
        return [from_row(ScheduleFiring, row) for row in (await self._session.execute(statement)).scalars()]

    async def schedules_with_queued_firings(self, limit: int) -> list[str]:
        statement = (
            sa.select(ScheduleFiringRow.schedule_id)
            .where(ScheduleFiringRow.outcome == QUEUED)
            .group_by(ScheduleFiringRow.schedule_id)
            .limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def run_in_flight(self, run_id: str) -> bool:
        found = await self._session.scalar(sa.select(sa.exists().where(AgentRunRow.run_id == run_id)))
        return bool(found)

    async def interrupt_run(self, run_id: str) -> None:
        await self._session.execute(
            sa.update(SessionTurnRow).where(SessionTurnRow.run_id == run_id).values(interrupted=True)
        )


class InMemorySchedules(ScheduleTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `schedules`
    and `schedule_firings` (id → value)."""

    _state: State

    async def insert_schedule(self, schedule: Schedule) -> Schedule:
        if await self.get_schedule_by_name(schedule.project_id, schedule.name) is not None:
            raise name_taken(schedule.name)
        self._state.schedules[schedule.id] = schedule
        return schedule

    async def get_schedule(self, schedule_id: str, *, project_id: str | None = None) -> Schedule | None:
        found = self._state.schedules.get(schedule_id)
        if found is None or (project_id is not None and found.project_id != project_id):
            return None
        return found

    async def get_schedule_by_name(self, project_id: str, name: str) -> Schedule | None:
        schedules = self._state.schedules.values()
        return next((s for s in schedules if (s.project_id, s.name) == (project_id, name)), None)

    async def list_schedules(self, project_id: str, page: PageRequest) -> Slice[Schedule]:
        return keyset_slice([s for s in self._state.schedules.values() if s.project_id == project_id], page)

    async def update_schedule(self, schedule: Schedule) -> Schedule:
        same_name = await self.get_schedule_by_name(schedule.project_id, schedule.name)
        if same_name is not None and same_name.id != schedule.id:
            raise name_taken(schedule.name)
        self._state.schedules[schedule.id] = schedule
        return schedule

    async def delete_schedule(self, schedule_id: str) -> None:
        self._state.schedules.pop(schedule_id, None)
        firings = self._state.schedule_firings
        for firing_id in [f.id for f in firings.values() if f.schedule_id == schedule_id]:
            del firings[firing_id]

    async def delete_project_schedules(self, project_id: str) -> None:
        for schedule_id in [s.id for s in self._state.schedules.values() if s.project_id == project_id]:
            await self.delete_schedule(schedule_id)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        due = [
            s
            for s in self._state.schedules.values()
            if s.enabled and s.next_fire_at is not None and s.next_fire_at <= now
        ]
        return sorted(due, key=lambda s: (s.next_fire_at, s.id))[:limit]

    async def advance_schedule(self, schedule_id: str, due_at: datetime, next_fire_at: datetime) -> bool:
        found = self._state.schedules.get(schedule_id)
        if found is None or not found.enabled or found.next_fire_at != due_at:
            return False
        self._state.schedules[schedule_id] = found.model_copy(update={"next_fire_at": next_fire_at})
        return True

    async def insert_firing(self, firing: ScheduleFiring) -> ScheduleFiring:
        if any(
            (f.schedule_id, f.due_at) == (firing.schedule_id, firing.due_at)
            for f in self._state.schedule_firings.values()
        ):
            raise ValueError(f"schedule {firing.schedule_id} has a firing due at {firing.due_at}")
        self._state.schedule_firings[firing.id] = firing
        return firing

    async def get_firing(self, firing_id: str) -> ScheduleFiring | None:
        return self._state.schedule_firings.get(firing_id)

    async def update_firing(self, firing: ScheduleFiring, *, outcome_was: str) -> bool:
        current = self._state.schedule_firings.get(firing.id)
        if current is None or current.outcome != outcome_was:
            return False
        self._state.schedule_firings[firing.id] = firing
        return True

    async def list_firings(self, schedule_id: str, page: PageRequest) -> Slice[ScheduleFiring]:
        firings = [f for f in self._state.schedule_firings.values() if f.schedule_id == schedule_id]
        ordered = sorted(firings, key=lambda f: (f.due_at, f.id), reverse=True)
        if page.after is not None:
            ordered = [f for f in ordered if (f.due_at, f.id) < page.after]
        else:
            ordered = ordered[page.skip :]
        return Slice(items=ordered[: page.size], has_more=len(ordered) > page.size, total=len(firings))

    async def open_firings(self, schedule_id: str) -> list[ScheduleFiring]:
        firings = self._state.schedule_firings.values()
        return sorted(
            (f for f in firings if f.schedule_id == schedule_id and f.outcome in OPEN), key=lambda f: f.due_at
        )

    async def schedules_with_queued_firings(self, limit: int) -> list[str]:
        ids = {f.schedule_id for f in self._state.schedule_firings.values() if f.outcome == QUEUED}
        return sorted(ids)[:limit]

    async def run_in_flight(self, run_id: str) -> bool:
        return any(key[1] == run_id for key in (*self._state.runs, *self._state.leases))

    async def interrupt_run(self, run_id: str) -> None:
        self._state.turns = [
            SessionTurn(t.session_id, t.run, interrupted=True) if t.run[1] == run_id else t
            for t in self._state.turns
        ]
