"""`/api/v1/projects/{project_id}/schedules`: a project's schedules over REST (its owner or
superusers), a thin adapter to the registry's schedule RPCs: create, list, read, change, delete,
run now, and each schedule's firings."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from google.protobuf import field_mask_pb2
from pydantic import BaseModel, Field

from agentmesh.gateway.http import convert, schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.http.schemas import RequestBody, _unchanged
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
BASE = "/api/v1/projects/{project_id}/schedules"
PageNumber = Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")]
PageSize = Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")]

# Policies are checked by the registry, so a bad one is a 400 naming the field like a bad cron.
SessionPolicy = str
MissedPolicy = str
OverlapPolicy = str


class ScheduleCreate(RequestBody):
    """An agent of the project run on a cron expression, as the schedule's creator."""

    name: str = Field(description="a DNS label no other schedule of the project has")
    agent: str = Field(description="the agent it runs: its slug in the project")
    message: str = Field(description="what each firing sends; {{scheduled_for}} and {{now}} are filled in")
    cron: str = Field(description="five fields: minute hour day-of-month month day-of-week")
    time_zone: str = Field(default="UTC", description="IANA time zone the cron expression is read in")
    session_policy: SessionPolicy = Field(
        default="new",
        description="`new` (a session per firing) or `continue` (one session the schedule owns)",
    )
    missed_policy: MissedPolicy = Field(
        default="skip",
        description="due times missed while the mesh was down: `skip` them or `run_once` for them",
    )
    overlap_policy: OverlapPolicy = Field(
        default="skip",
        description="when the previous firing's run is still going: `skip`, `queue` or `cancel_previous`",
    )
    enabled: bool = True


class ScheduleUpdate(RequestBody):
    """Only the fields present change; the next fire time follows the cron, zone and enabled flag."""

    name: str = _unchanged()
    agent: str = _unchanged()
    message: str = _unchanged()
    cron: str = _unchanged()
    time_zone: str = _unchanged()
    session_policy: SessionPolicy = _unchanged()
    missed_policy: MissedPolicy = _unchanged()
    overlap_policy: OverlapPolicy = _unchanged()
    enabled: bool = _unchanged()


class ScheduleOut(BaseModel):
    id: str
    project_id: str
    name: str
    agent: str
    message: str
    cron: str
    time_zone: str
    session_policy: str
    missed_policy: str
    overlap_policy: str
    enabled: bool
    next_fire_at: datetime | None = Field(description="when it fires next; null while disabled")
    session_id: str = Field(description="with session_policy continue: the session it continues")
    created_by: str
    created_at: datetime | None


class ScheduleFiringOut(BaseModel):
    id: str
    schedule_id: str
    due_at: datetime | None
    outcome: str = Field(
        description="pending, queued, running, completed, failed, skipped_overlap, skipped_missed, cancelled"
    )
    run_id: str
    session_id: str
    error: str
    fired_at: datetime | None
    ended_at: datetime | None


def _out(value: resources_pb2.Schedule) -> ScheduleOut:
    return ScheduleOut(
        id=value.id,
        project_id=value.project_id,
        name=value.name,
        agent=value.agent,
        message=value.message,
        cron=value.cron,
        time_zone=value.time_zone,
        session_policy=value.session_policy,
        missed_policy=value.missed_policy,
        overlap_policy=value.overlap_policy,
        enabled=value.enabled,
        next_fire_at=convert.timestamp(value.next_fire_at),
        session_id=value.session_id,
        created_by=value.created_by,
        created_at=convert.timestamp(value.created_at),
    )


def _firing_out(value: resources_pb2.ScheduleFiring) -> ScheduleFiringOut:
    return ScheduleFiringOut(
        id=value.id,
        schedule_id=value.schedule_id,
        due_at=convert.timestamp(value.due_at),
        outcome=value.outcome,
        run_id=value.run_id,
        session_id=value.session_id,
        error=value.error,
        fired_at=convert.timestamp(value.fired_at),
        ended_at=convert.timestamp(value.ended_at),
    )


def schedule_router() -> APIRouter:
    router = APIRouter(prefix=BASE, tags=["schedules"])

    @router.post("", status_code=201)
    async def create_schedule(project_id: str, body: ScheduleCreate, ctx: Ctx, caller: Auth) -> ScheduleOut:
        """Creates a schedule. 400 naming the field for a bad cron expression, time zone or
        policy; 409 when the name is taken."""
        schedule = resources_pb2.Schedule(project_id=project_id, **body.model_dump())
        request = reg.CreateScheduleRequest(schedule=schedule)
        return _out((await ctx.call(ctx.registry.stub.CreateSchedule, request, caller)).schedule)

    @router.get("")
    async def list_schedules(
        project_id: str, ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[ScheduleOut]:
        """The project's schedules, oldest first, paged."""
        request = reg.ListSchedulesRequest(project_id=project_id, page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListSchedules, request, caller)
        return schemas.Page[ScheduleOut](
            data=[_out(schedule) for schedule in response.schedules],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/{schedule_id}")
    async def get_schedule(project_id: str, schedule_id: str, ctx: Ctx, caller: Auth) -> ScheduleOut:
        """One schedule of the project, with when it fires next."""
        request = reg.GetScheduleRequest(project_id=project_id, id=schedule_id)
        return _out((await ctx.call(ctx.registry.stub.GetSchedule, request, caller)).schedule)

    @router.patch("/{schedule_id}")
    async def update_schedule(
        project_id: str, schedule_id: str, body: ScheduleUpdate, ctx: Ctx, caller: Auth
    ) -> ScheduleOut:
        """Changes the fields present in the body."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            return await get_schedule(project_id, schedule_id, ctx, caller)
        request = reg.UpdateScheduleRequest(
            schedule=resources_pb2.Schedule(project_id=project_id, id=schedule_id, **fields),
            update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)),
        )
        return _out((await ctx.call(ctx.registry.stub.UpdateSchedule, request, caller)).schedule)

    @router.delete("/{schedule_id}")
    async def delete_schedule(
        project_id: str, schedule_id: str, ctx: Ctx, caller: Auth
    ) -> schemas.MessageOut:
        """Deletes a schedule and its history; a run it started goes on."""
        request = reg.DeleteScheduleRequest(project_id=project_id, id=schedule_id)
        await ctx.call(ctx.registry.stub.DeleteSchedule, request, caller)
        return schemas.MessageOut(message=f"schedule {schedule_id} deleted")

    @router.post("/{schedule_id}/run")
    async def run_schedule(project_id: str, schedule_id: str, ctx: Ctx, caller: Auth) -> ScheduleOut:
        """Makes the schedule due now: a gateway fires it within a second or so, under its
        overlap policy. 409 when it is disabled."""
        request = reg.RunScheduleRequest(project_id=project_id, id=schedule_id)
        return _out((await ctx.call(ctx.registry.stub.RunSchedule, request, caller)).schedule)

    @router.get("/{schedule_id}/firings")
    async def list_schedule_firings(
        project_id: str,
        schedule_id: str,
        ctx: Ctx,
        caller: Auth,
        page: PageNumber = 1,
        page_size: PageSize = 50,
    ) -> schemas.Page[ScheduleFiringOut]:
        """The schedule's history: each due time, its run and session, and its outcome, newest first."""
        request = reg.ListScheduleFiringsRequest(
            project_id=project_id, schedule_id=schedule_id, page=page, page_size=page_size
        )
        response = await ctx.call(ctx.registry.stub.ListScheduleFirings, request, caller)
        return schemas.Page[ScheduleFiringOut](
            data=[_firing_out(firing) for firing in response.firings],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    return router
