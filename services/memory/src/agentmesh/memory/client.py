"""The memory service's client: the only module of the memory service that others import.

Besides `MemoryClient`, it offers the memory service's errors (what callers catch, and what the
gateway raises when it means the same thing, such as `SessionNotFound`), the JSON view of events
for REST routes: `event_to_dict` and `session_to_dict` (the field names of DESIGN §4) and the
event type names (`event_type_name`, `event_type_from_name`, `event_type_names`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc

from agentmesh.internal.memory.v1 import memory_internal_service_pb2 as internal_pb
from agentmesh.internal.memory.v1 import memory_internal_service_pb2_grpc as internal_pb_grpc
from agentmesh.memory.convert import (
    event_to_dict,
    event_type_from_name,
    event_type_name,
    event_type_names,
    session_to_dict,
)
from agentmesh.memory.errors import (
    AfterSeqAhead,
    EventTooLarge,
    ExpectedLastSeqMismatch,
    HistoryTrimmed,
    IdempotencyKeyReused,
    ProjectDeleted,
    RunEnded,
    RunTakenOver,
    SessionNotFound,
    TooManyEvents,
)
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.client import Metadata, stream, unary

__all__ = [
    "AfterSeqAhead",
    "EventTooLarge",
    "ExpectedLastSeqMismatch",
    "HistoryTrimmed",
    "IdempotencyKeyReused",
    "MemoryClient",
    "ProjectDeleted",
    "RunEnded",
    "RunTakenOver",
    "SessionNotFound",
    "TooManyEvents",
    "event_to_dict",
    "event_type_from_name",
    "event_type_name",
    "event_type_names",
    "session_to_dict",
]


class MemoryClient:
    """Typed calls to the memory service; failures raise the DomainError it raised."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.MemoryServiceStub(channel)
        self.internal_stub = internal_pb_grpc.MemoryInternalServiceStub(channel)

    async def append_events(
        self,
        session_id: str,
        project_id: str,
        events: Sequence[pb.NewEvent],
        *,
        expected_last_seq: int | None = None,
        receipts_only: bool = False,
        list_after_append: pb.ListEventsRequest | None = None,
        metadata: Metadata | None = None,
    ) -> pb.AppendEventsResponse:
        """Appends `events`; with `receipts_only` the answer's events carry only their id, session,
        seq and time (the caller knows what it sent); with `list_after_append`, the answer's
        `listed` is that listing of the session read after the append."""
        request = pb.AppendEventsRequest(
            session_id=session_id,
            project_id=project_id,
            events=events,
            expected_last_seq=expected_last_seq,
            receipts_only=receipts_only,
            list_after_append=list_after_append,
        )
        return await unary(self.stub.AppendEvents, request, metadata=metadata)

    async def list_events(
        self, request: pb.ListEventsRequest, *, metadata: Metadata | None = None
    ) -> pb.ListEventsResponse:
        return await unary(self.stub.ListEvents, request, metadata=metadata)

    async def iter_events(
        self, request: pb.ListEventsRequest, *, metadata: Metadata | None = None
    ) -> AsyncIterator[resources_pb2.Event]:
        """Every event `request` selects, page after page."""
        page = pb.ListEventsRequest()
        page.CopyFrom(request)
        while True:
            response = await self.list_events(page, metadata=metadata)
            for event in response.events:
                yield event
            if not response.next_page_token:
                return
            page.page_token = response.next_page_token

    async def watch_events(
        self, session_id: str, after_seq: int = 0, *, project_id: str = "", metadata: Metadata | None = None
    ) -> AsyncIterator[resources_pb2.Event]:
        request = pb.WatchEventsRequest(session_id=session_id, after_seq=after_seq, project_id=project_id)
        async for response in stream(self.stub.WatchEvents, request, metadata=metadata):
            yield response.event

    async def get_session(
        self, session_id: str, *, project_id: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.Session:
        request = pb.GetSessionRequest(session_id=session_id, project_id=project_id)
        return (await unary(self.stub.GetSession, request, metadata=metadata)).session

    async def reset_session_context(
        self, session_id: str, *, project_id: str, metadata: Metadata | None = None
    ) -> resources_pb2.Session:
        """Starts the session's context afresh (its events stay)."""
        request = pb.ResetSessionContextRequest(session_id=session_id, project_id=project_id)
        return (await unary(self.stub.ResetSessionContext, request, metadata=metadata)).session

    async def fork_session(
        self,
        session_id: str,
        *,
        project_id: str,
        at_seq: int,
        new_session_id: str = "",
        metadata: Metadata | None = None,
    ) -> resources_pb2.Session:
        """A new session that reads this one's events up to `at_seq` and goes its own way."""
        request = pb.ForkSessionRequest(
            session_id=session_id, project_id=project_id, at_seq=at_seq, new_session_id=new_session_id
        )
        return (await unary(self.stub.ForkSession, request, metadata=metadata)).session

    async def list_sessions(
        self,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
        metadata: Metadata | None = None,
    ) -> pb.ListSessionsResponse:
        request = pb.ListSessionsRequest(
            project_id=project_id, page_size=page_size, page_token=page_token, page=page
        )
        return await unary(self.stub.ListSessions, request, metadata=metadata)

    async def set_retention_policy(
        self,
        project_id: str,
        *,
        max_age_seconds: int = 0,
        max_events_per_session: int = 0,
        metadata: Metadata | None = None,
    ) -> resources_pb2.RetentionPolicy:
        policy = resources_pb2.RetentionPolicy(
            project_id=project_id,
            max_age_seconds=max_age_seconds,
            max_events_per_session=max_events_per_session,
        )
        request = pb.SetRetentionPolicyRequest(policy=policy)
        return (await unary(self.stub.SetRetentionPolicy, request, metadata=metadata)).policy

    async def get_retention_policy(
        self, project_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.RetentionPolicy:
        request = pb.GetRetentionPolicyRequest(project_id=project_id)
        return (await unary(self.stub.GetRetentionPolicy, request, metadata=metadata)).policy

    async def delete_project_sessions(self, project_id: str, *, metadata: Metadata | None = None) -> int:
        """Erases a deleted project's sessions (the mesh's own services only); how many."""
        request = internal_pb.DeleteProjectSessionsRequest(project_id=project_id)
        return (
            await unary(self.internal_stub.DeleteProjectSessions, request, metadata=metadata)
        ).deleted_sessions

    async def erase_run(
        self, session_id: str, project_id: str, run_id: str, *, metadata: Metadata | None = None
    ) -> int:
        """Erases the session's log when it is the run's turn alone (the mesh's own services
        only); how many events went."""
        request = internal_pb.EraseRunRequest(project_id=project_id, session_id=session_id, run_id=run_id)
        return (await unary(self.internal_stub.EraseRun, request, metadata=metadata)).erased_events
