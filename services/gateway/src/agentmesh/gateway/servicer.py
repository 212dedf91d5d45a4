"""GatewayService over gRPC: proto in, proto out, a thin adapter over the gateway's core
(gateway.py). The caller was authorized by the policy interceptor before these run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.access import current_caller
from agentmesh.gateway.errors import InvalidRequest
from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.models import AgentRef
from agentmesh.gateway.v1 import gateway_service_pb2 as pb
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.runtime.batching import batched, merge_text_deltas

SESSION_ID_HEADER = "x-session-id"


class GatewayServicer(pb_grpc.GatewayServiceServicer):
    """Chat, StreamChat, ResetSession and RespondToInput."""

    def __init__(self, gateway: AgentGateway) -> None:
        self._gateway = gateway

    async def Chat(self, request: pb.ChatRequest, context: grpc.aio.ServicerContext) -> pb.ChatResponse:
        agent = AgentRef.parse(request.agent)
        session_id = self._gateway.session_id(request.session_id)
        result = await self._gateway.chat(
            current_caller(),
            agent,
            request.message,
            session_id,
            model_settings=_settings(request),
            double_texting=request.double_texting,
        )
        return pb.ChatResponse(
            session_id=result.session_id,
            run_id=result.run_id,
            content=result.content,
            usage=result.usage,
            input_requests=result.input_requests,
        )

    async def StreamChat(
        self, request: pb.StreamChatRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamChatResponse]:
        agent = AgentRef.parse(request.agent)
        if request.resume_after_seq or request.resume_run_id:
            rest = await self._gateway.resume_chat(
                current_caller(),
                agent,
                request.session_id,
                after_seq=request.resume_after_seq,
                run_id=request.resume_run_id,
            )
            await context.send_initial_metadata(((SESSION_ID_HEADER, request.session_id),))
            async for response in _responses(rest, batch=request.batch_events):
                yield response
            return
        session_id = self._gateway.session_id(request.session_id)
        # Nothing is sent before the run has started, so a refused chat ends with its own status.
        chat = await self._gateway.start_chat(
            current_caller(),
            agent,
            request.message,
            session_id,
            model_settings=_settings(request),
            double_texting=request.double_texting,
        )
        async with contextlib.aclosing(chat):
            await context.send_initial_metadata(((SESSION_ID_HEADER, session_id),))
            async for response in _responses(chat.events(), batch=request.batch_events):
                yield response

    async def RespondToInput(
        self, request: pb.RespondToInputRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.RespondToInputResponse]:
        rest = await self._gateway.respond_to_input(
            current_caller(), request.project_id, request.id, request.response
        )
        async with contextlib.aclosing(rest):  # type: ignore[type-var]
            async for event in rest:
                yield pb.RespondToInputResponse(event=event)

    async def ResetSession(
        self, request: pb.ResetSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResetSessionResponse:
        for name in ("project_id", "session_id"):
            if not getattr(request, name):
                raise InvalidRequest.field(name, "is required")
        released = await self._gateway.reset_session(current_caller(), request.project_id, request.session_id)
        return pb.ResetSessionResponse(released_agents=released)


async def _responses(
    events: AsyncIterator[run_pb2.RunEvent], *, batch: bool
) -> AsyncIterator[pb.StreamChatResponse]:
    """One event per message, or for a client that opted in, what was ready together (text
    deltas that were ready together merged into one). The one-event-per-message stream sends the
    events as the executor sent them: their deltas may have been merged on the way already."""
    if not batch:
        async for event in events:
            yield pb.StreamChatResponse(event=event)
        return
    async with contextlib.aclosing(batched(events)) as batches:
        async for events_ready in batches:
            yield pb.StreamChatResponse(events=merge_text_deltas(events_ready))


def _settings(request: pb.ChatRequest | pb.StreamChatRequest) -> run_pb2.ModelSettings | None:
    return request.model_settings if request.HasField("model_settings") else None


class RegistryOverrides:
    """The registry RPCs the gateway serves itself instead of only forwarding them (forwarding.py
    forwards every other one)."""

    def __init__(self, gateway: AgentGateway) -> None:
        self._gateway = gateway

    async def DeleteProject(self, request: reg.DeleteProjectRequest) -> reg.DeleteProjectResponse:
        """Deleting a project also erases its sessions and events."""
        return await self._gateway.delete_project(current_caller(), request.id)

    async def DeleteAgent(self, request: reg.DeleteAgentRequest) -> reg.DeleteAgentResponse:
        """Terminating an agent also stops its runs in flight."""
        message = await self._gateway.terminate_agent(current_caller(), request.project_id, request.id)
        return reg.DeleteAgentResponse(message=message)
