"""The MemoryService and MemoryInternalService gRPC adapters: protobuf in, protobuf out. Rules live
in `memory.py`; errors leave as DomainErrors, which the shared interceptor turns into rich
statuses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from agentmesh.internal.memory.v1 import memory_internal_service_pb2 as internal_pb
from agentmesh.internal.memory.v1 import memory_internal_service_pb2_grpc as internal_pb_grpc
from agentmesh.memory import convert
from agentmesh.memory.memory import EventLog
from agentmesh.memory.ownership import ProjectOwners
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentmesh.runtime.errors import FieldViolation, NotFound, ValidationFailed
from agentmesh.runtime.identity import current_principal


def _listing_after_append(request: pb.AppendEventsRequest) -> pb.ListEventsRequest:
    """The append's `list_after_append`, within the append's session (checked with it)."""
    listing = pb.ListEventsRequest()
    listing.CopyFrom(request.list_after_append)
    for name in ("session_id", "project_id"):
        given, own = getattr(listing, name), getattr(request, name)
        if given and given != own:
            raise ValidationFailed.of(
                [FieldViolation(f"list_after_append.{name}", f"must be the append's ({own!r}) or empty")]
            )
        setattr(listing, name, own)
    return listing


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    """Serves an EventLog over gRPC. Each call made for a user is first checked against the
    project's owner (`ProjectOwners`): a service forwarding the wrong user's token is refused."""

    def __init__(self, log: EventLog, owners: ProjectOwners) -> None:
        self._log = log
        self._owners = owners

    async def _check_project(self, project_id: str) -> None:
        await self._owners.check_project(current_principal.get(), project_id)

    async def _check_session(self, session_id: str, project_id: str) -> None:
        """The session's project is the request's, or — when it names none — the one the log
        finds the session in; a session the log cannot find is left for the call to answer."""
        principal = current_principal.get()
        if principal is not None and principal.is_superuser:
            return
        if not project_id:
            try:
                project_id = (await self._log.get_session(session_id)).project_id
            except NotFound:
                return
        await self._owners.check_session(principal, session_id, project_id)

    async def AppendEvents(
        self, request: pb.AppendEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendEventsResponse:
        await self._check_session(request.session_id, request.project_id)
        listing = None
        if request.HasField("list_after_append"):
            listing = _listing_after_append(request)
            self._log.check_listing(
                convert.event_query_from_proto(listing),
                page_size=listing.page_size,
                page_token=listing.page_token,
            )
        result = await self._log.append(
            request.session_id,
            request.project_id,
            convert.new_events_from_proto(request.events),
            expected_last_seq=request.expected_last_seq if request.HasField("expected_last_seq") else None,
        )
        response = convert.append_response(result, receipts_only=request.receipts_only)
        if listing is not None:
            response.listed.CopyFrom(await self._list(listing))
        return response

    async def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEventsResponse:
        if request.session_id:
            await self._check_session(request.session_id, request.project_id)
        else:
            await self._check_project(request.project_id)
        return await self._list(request)

    async def _list(self, request: pb.ListEventsRequest) -> pb.ListEventsResponse:
        page = await self._log.list_events(
            convert.event_query_from_proto(request),
            page_size=request.page_size,
            page_token=request.page_token,
            include_total_size=request.include_total_size,
        )
        return pb.ListEventsResponse(
            events=convert.events_to_proto(page.events),
            next_page_token=page.next_page_token,
            total_size=page.total_size,
            byte_limit_reached=page.byte_limit_reached,
        )

    async def WatchEvents(
        self, request: pb.WatchEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchEventsResponse]:
        await self._check_session(request.session_id, request.project_id)
        async for event in self._log.watch(request.session_id, request.after_seq, request.project_id):
            yield pb.WatchEventsResponse(event=convert.event_to_proto(event))

    async def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetSessionResponse:
        await self._check_session(request.session_id, request.project_id)
        session = await self._log.get_session(request.session_id, request.project_id)
        return pb.GetSessionResponse(session=convert.session_to_proto(session))

    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSessionsResponse:
        await self._check_project(request.project_id)
        page = await self._log.list_sessions(
            request.project_id, page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListSessionsResponse(
            sessions=[convert.session_to_proto(session) for session in page.sessions],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def SetRetentionPolicy(
        self, request: pb.SetRetentionPolicyRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetRetentionPolicyResponse:
        await self._check_project(request.policy.project_id)
        policy = await self._log.set_retention_policy(convert.retention_policy_from_proto(request.policy))
        return pb.SetRetentionPolicyResponse(policy=convert.retention_policy_to_proto(policy))

    async def GetRetentionPolicy(
        self, request: pb.GetRetentionPolicyRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetRetentionPolicyResponse:
        await self._check_project(request.project_id)
        policy = await self._log.get_retention_policy(request.project_id)
        return pb.GetRetentionPolicyResponse(policy=convert.retention_policy_to_proto(policy))

    async def ResetSessionContext(
        self, request: pb.ResetSessionContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResetSessionContextResponse:
        await self._check_session(request.session_id, request.project_id)
        session = await self._log.reset_context(request.session_id, request.project_id)
        return pb.ResetSessionContextResponse(session=convert.session_to_proto(session))

    async def ForkSession(
        self, request: pb.ForkSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForkSessionResponse:
        await self._check_session(request.session_id, request.project_id)
        session = await self._log.fork(
            request.session_id,
            request.project_id,
            at_seq=request.at_seq,
            new_session_id=request.new_session_id,
        )
        return pb.ForkSessionResponse(session=convert.session_to_proto(session))


class MemoryInternalServicer(internal_pb_grpc.MemoryInternalServiceServicer):
    """Serves what only the mesh's services ask of an EventLog."""

    def __init__(self, log: EventLog) -> None:
        self._log = log

    async def DeleteProjectSessions(
        self, request: internal_pb.DeleteProjectSessionsRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb.DeleteProjectSessionsResponse:
        deleted = await self._log.delete_project(request.project_id)
        return internal_pb.DeleteProjectSessionsResponse(deleted_sessions=deleted)

    async def EraseRun(
        self, request: internal_pb.EraseRunRequest, context: grpc.aio.ServicerContext
    ) -> internal_pb.EraseRunResponse:
        erased = await self._log.erase_run(request.session_id, request.project_id, request.run_id)
        return internal_pb.EraseRunResponse(erased_events=erased)
