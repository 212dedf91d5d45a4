"""The memory service's client: the only module of the memory service that others import."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc

from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.client import Metadata, stream, unary


class MemoryClient:
    """Typed calls to the memory service; failures raise the DomainError it raised."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.MemoryServiceStub(channel)

    async def append_events(
        self,
        session_id: str,
        project_id: str,
        events: Sequence[pb.NewEvent],
        *,
        expected_last_seq: int | None = None,
        metadata: Metadata | None = None,
    ) -> pb.AppendEventsResponse:
        request = pb.AppendEventsRequest(
            session_id=session_id, project_id=project_id, events=events, expected_last_seq=expected_last_seq
        )
        return await unary(self.stub.AppendEvents, request, metadata=metadata)

    async def list_events(
        self, request: pb.ListEventsRequest, *, metadata: Metadata | None = None
    ) -> pb.ListEventsResponse:
        return await unary(self.stub.ListEvents, request, metadata=metadata)

    async def watch_events(
        self, session_id: str, after_seq: int = 0, *, metadata: Metadata | None = None
    ) -> AsyncIterator[resources_pb2.Event]:
        request = pb.WatchEventsRequest(session_id=session_id, after_seq=after_seq)
        async for response in stream(self.stub.WatchEvents, request, metadata=metadata):
            yield response.event

    async def get_session(
        self, session_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Session:
        request = pb.GetSessionRequest(session_id=session_id)
        return (await unary(self.stub.GetSession, request, metadata=metadata)).session
