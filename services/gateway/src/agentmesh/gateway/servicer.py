"""GatewayService over gRPC: proto in, proto out. The caller was authorized by the policy
interceptor before these run; the chat rules live in gateway.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from agentmesh.gateway.access import current_caller
from agentmesh.gateway.gateway import ChatGateway
from agentmesh.gateway.models import AgentRef
from agentmesh.gateway.v1 import gateway_service_pb2 as pb
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as pb_grpc

SESSION_ID_HEADER = "x-session-id"


class GatewayServicer(pb_grpc.GatewayServiceServicer):
    def __init__(self, gateway: ChatGateway) -> None:
        self._gateway = gateway

    async def Chat(self, request: pb.ChatRequest, context: grpc.aio.ServicerContext) -> pb.ChatResponse:
        agent = AgentRef.parse(request.agent)
        session_id = self._gateway.session_id(request.session_id)
        result = await self._gateway.chat(current_caller(), agent, request.message, session_id)
        return pb.ChatResponse(
            session_id=result.session_id, run_id=result.run_id, content=result.content, usage=result.usage
        )

    async def StreamChat(
        self, request: pb.StreamChatRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamChatResponse]:
        agent = AgentRef.parse(request.agent)
        session_id = self._gateway.session_id(request.session_id)
        events = self._gateway.stream_chat(current_caller(), agent, request.message, session_id)
        # Nothing is sent before the run has started, so a refused chat ends with its own status.
        first = await anext(events, None)
        await context.send_initial_metadata(((SESSION_ID_HEADER, session_id),))
        if first is None:
            return
        yield pb.StreamChatResponse(event=first)
        async for event in events:
            yield pb.StreamChatResponse(event=event)
