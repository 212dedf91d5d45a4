"""GatewayService over gRPC: authenticates the caller, then hands the chat to ChatGateway."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from agentmesh.gateway.gateway import AgentRef, ChatGateway
from agentmesh.gateway.v1 import gateway_service_pb2 as pb
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from agentmesh.runtime.identity import TokenCodec, authenticate


class GatewayServicer(pb_grpc.GatewayServiceServicer):
    def __init__(self, gateway: ChatGateway, tokens: TokenCodec) -> None:
        self._gateway = gateway
        self._tokens = tokens

    async def Chat(self, request: pb.ChatRequest, context: grpc.aio.ServicerContext) -> pb.ChatResponse:
        principal = authenticate(self._tokens, context.invocation_metadata())
        session_id = request.session_id or self._gateway.new_session_id()
        result = await self._gateway.chat(
            principal, AgentRef.parse(request.agent), request.message, session_id
        )
        return pb.ChatResponse(
            session_id=result.session_id, run_id=result.run_id, content=result.content, usage=result.usage
        )

    async def StreamChat(
        self, request: pb.StreamChatRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamChatResponse]:
        principal = authenticate(self._tokens, context.invocation_metadata())
        session_id = request.session_id or self._gateway.new_session_id()
        await context.send_initial_metadata((("x-session-id", session_id),))
        agent = AgentRef.parse(request.agent)
        async for event in self._gateway.stream_chat(principal, agent, request.message, session_id):
            yield pb.StreamChatResponse(event=event)
