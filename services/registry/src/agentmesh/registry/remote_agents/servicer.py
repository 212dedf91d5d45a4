"""The remote A2A agent RPCs of RegistryService: proto in, proto out, mixed into
`RegistryServicer`. Answers mask the credential; ResolveRemoteAgent alone, which the policy table
grants the system principal only, carries it."""

from __future__ import annotations

import grpc

from agentmesh.registry.remote_agents.models import RemoteAgent
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry, masked
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


def remote_agent_message(remote: RemoteAgent, *, secrets: bool = False) -> resources_pb2.RemoteAgent:
    shown = remote if secrets else masked(remote)
    message = resources_pb2.RemoteAgent(
        id=shown.id,
        project_id=shown.project_id,
        name=shown.name,
        card_url=shown.card_url,
        credential=shown.credential,
        description=shown.description,
    )
    message.created_at.FromDatetime(shown.created_at)
    return message


class RemoteAgentRpcs:
    """Adapts the remote agent RPCs to `RemoteAgentRegistry`."""

    _remote_agents: RemoteAgentRegistry

    async def CreateRemoteAgent(
        self, request: pb.CreateRemoteAgentRequest, context: Context
    ) -> pb.CreateRemoteAgentResponse:
        given = request.remote_agent
        remote = await self._remote_agents.create(
            caller(),
            project_id=given.project_id,
            name=given.name,
            card_url=given.card_url,
            credential=given.credential,
            description=given.description,
        )
        return pb.CreateRemoteAgentResponse(remote_agent=remote_agent_message(remote))

    async def GetRemoteAgent(
        self, request: pb.GetRemoteAgentRequest, context: Context
    ) -> pb.GetRemoteAgentResponse:
        remote = await self._remote_agents.get(caller(), request.project_id, request.id)
        return pb.GetRemoteAgentResponse(remote_agent=remote_agent_message(remote))

    async def ListRemoteAgents(
        self, request: pb.ListRemoteAgentsRequest, context: Context
    ) -> pb.ListRemoteAgentsResponse:
        found = await self._remote_agents.list(
            caller(),
            request.project_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListRemoteAgentsResponse(
            remote_agents=[remote_agent_message(r) for r in found.items],
            next_page_token=found.next_page_token,
            total_size=found.total_size,
        )

    async def UpdateRemoteAgent(
        self, request: pb.UpdateRemoteAgentRequest, context: Context
    ) -> pb.UpdateRemoteAgentResponse:
        given = request.remote_agent
        remote = await self._remote_agents.update(
            caller(),
            RemoteAgent(
                id=given.id,
                project_id=given.project_id,
                name=given.name,
                card_url=given.card_url,
                credential=given.credential,
                description=given.description,
                created_at=given.created_at.ToDatetime(),
            ),
            request.update_mask.paths,
        )
        return pb.UpdateRemoteAgentResponse(remote_agent=remote_agent_message(remote))

    async def DeleteRemoteAgent(
        self, request: pb.DeleteRemoteAgentRequest, context: Context
    ) -> pb.DeleteRemoteAgentResponse:
        await self._remote_agents.delete(caller(), request.project_id, request.id)
        return pb.DeleteRemoteAgentResponse()
