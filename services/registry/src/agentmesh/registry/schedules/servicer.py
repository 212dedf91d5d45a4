"""The schedule RPCs of RegistryService (`ScheduleRpcs`, mixed into `RegistryServicer`) and of
RegistryInternalService (`ScheduleFiringRpcs`, mixed into `RegistryInternalServicer`): proto in,
proto out."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.convert import user_message
from agentmesh.registry.schedules.claims import ScheduleClaims
from agentmesh.registry.schedules.models import Schedule, ScheduleFiring
from agentmesh.registry.schedules.registry import ScheduleRegistry
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


def schedule_message(schedule: Schedule) -> resources_pb2.Schedule:
    message = resources_pb2.Schedule(
        **schedule.model_dump(exclude={"next_fire_at", "created_at"}),
    )
    if schedule.next_fire_at is not None:
        message.next_fire_at.FromDatetime(schedule.next_fire_at)
    message.created_at.FromDatetime(schedule.created_at)
    return message


def firing_message(firing: ScheduleFiring) -> resources_pb2.ScheduleFiring:
    message = resources_pb2.ScheduleFiring(**firing.model_dump(exclude={"due_at", "fired_at", "ended_at"}))
    message.due_at.FromDatetime(firing.due_at)
    message.fired_at.FromDatetime(firing.fired_at)
    if firing.ended_at is not None:
        message.ended_at.FromDatetime(firing.ended_at)
    return message


def schedule_from_message(given: resources_pb2.Schedule) -> Schedule:
    """What a request names (defaults for the policies and time zone left empty)."""
    return Schedule(
        id=given.id,
        project_id=given.project_id,
        name=given.name,
        agent=given.agent,
        message=given.message,
        cron=given.cron,
        time_zone=given.time_zone or "UTC",
        session_policy=given.session_policy or "new",
        missed_policy=given.missed_policy or "skip",
        overlap_policy=given.overlap_policy or "skip",
        enabled=given.enabled if given.HasField("enabled") else True,
        created_by="",
        created_at=datetime.now(UTC),
    )


class ScheduleRpcs:
    """Adapts the schedule RPCs to `ScheduleRegistry`."""

    _schedules: ScheduleRegistry

    async def CreateSchedule(
        self, request: pb.CreateScheduleRequest, context: Context
    ) -> pb.CreateScheduleResponse:
        schedule = await self._schedules.create(caller(), schedule_from_message(request.schedule))
        return pb.CreateScheduleResponse(schedule=schedule_message(schedule))

    async def GetSchedule(self, request: pb.GetScheduleRequest, context: Context) -> pb.GetScheduleResponse:
        schedule = await self._schedules.get(caller(), request.project_id, request.id)
        return pb.GetScheduleResponse(schedule=schedule_message(schedule))

    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: Context
    ) -> pb.ListSchedulesResponse:
        found = await self._schedules.list(
            caller(),
            request.project_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListSchedulesResponse(
            schedules=[schedule_message(s) for s in found.items],
            next_page_token=found.next_page_token,
            total_size=found.total_size,
        )

    async def UpdateSchedule(
        self, request: pb.UpdateScheduleRequest, context: Context
    ) -> pb.UpdateScheduleResponse:
        given = request.schedule
        schedule = await self._schedules.update(
            caller(),
            schedule_from_message(given).model_copy(
                update={
                    # An empty policy or zone in the mask is a bad value, not the default.
                    "time_zone": given.time_zone,
                    "session_policy": given.session_policy,
                    "missed_policy": given.missed_policy,
                    "overlap_policy": given.overlap_policy,
                }
            ),
            request.update_mask.paths,
        )
        return pb.UpdateScheduleResponse(schedule=schedule_message(schedule))

    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: Context
    ) -> pb.DeleteScheduleResponse:
        await self._schedules.delete(caller(), request.project_id, request.id)
        return pb.DeleteScheduleResponse()

    async def RunSchedule(self, request: pb.RunScheduleRequest, context: Context) -> pb.RunScheduleResponse:
        schedule = await self._schedules.run_now(caller(), request.project_id, request.id)
        return pb.RunScheduleResponse(schedule=schedule_message(schedule))

    async def ListScheduleFirings(
        self, request: pb.ListScheduleFiringsRequest, context: Context
    ) -> pb.ListScheduleFiringsResponse:
        found = await self._schedules.firings(
            caller(),
            request.project_id,
            request.schedule_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListScheduleFiringsResponse(
            firings=[firing_message(f) for f in found.items],
            next_page_token=found.next_page_token,
            total_size=found.total_size,
        )


class ScheduleFiringRpcs:
    """Adapts the internal firing RPCs to `ScheduleClaims`."""

    _claims: ScheduleClaims

    async def ClaimScheduleFirings(
        self, request: internal_pb.ClaimScheduleFiringsRequest, context: Context
    ) -> internal_pb.ClaimScheduleFiringsResponse:
        now = request.now.ToDatetime(tzinfo=UTC) if request.HasField("now") else datetime.now(UTC)
        claimed = await self._claims.claim(now, request.limit)
        return internal_pb.ClaimScheduleFiringsResponse(
            firings=[
                internal_pb.ClaimedFiring(
                    firing=firing_message(c.firing),
                    schedule=schedule_message(c.schedule),
                    project_slug=c.project_slug,
                    message=c.message,
                    creator=user_message(c.creator),
                    creator_token_version=c.creator.token_version,
                )
                for c in claimed
            ]
        )

    async def RecordScheduleFiring(
        self, request: internal_pb.RecordScheduleFiringRequest, context: Context
    ) -> internal_pb.RecordScheduleFiringResponse:
        await self._claims.record(
            request.firing_id, request.outcome, run_id=request.run_id, error=request.error
        )
        return internal_pb.RecordScheduleFiringResponse()
