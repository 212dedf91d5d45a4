"""The agent type and agent RPCs of RegistryService: proto in, proto out, mixed into
`RegistryServicer`. Pausing, resuming and deleting (terminating) an agent are its lifecycle's
transitions (`lifecycle.py`); creates and updates answer with the declaration warnings
(`capabilities.py`). ResolveAgent, for executors, is internal (`internal_servicer.py`)."""

from __future__ import annotations

import grpc
from google.protobuf import json_format, struct_pb2

from agentmesh.registry import convert
from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class AgentTypeRpcs:
    """Adapts the agent type RPCs to `AgentRegistry`."""

    _registry: AgentRegistry

    async def CreateAgentType(
        self, request: pb.CreateAgentTypeRequest, context: Context
    ) -> pb.CreateAgentTypeResponse:
        agent_type = await self._registry.create_agent_type(
            convert.agent_type_fields(request.agent_type), request_id=request.request_id
        )
        return pb.CreateAgentTypeResponse(
            agent_type=convert.agent_type_message(agent_type),
            warnings=await self._registry.agent_type_warnings(agent_type),
        )

    async def GetAgentType(
        self, request: pb.GetAgentTypeRequest, context: Context
    ) -> pb.GetAgentTypeResponse:
        agent_type = await self._registry.get_agent_type(type_id=request.id, slug=request.slug)
        return pb.GetAgentTypeResponse(agent_type=convert.agent_type_message(agent_type))

    async def ListAgentTypes(
        self, request: pb.ListAgentTypesRequest, context: Context
    ) -> pb.ListAgentTypesResponse:
        page = await self._registry.list_agent_types(
            page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListAgentTypesResponse(
            agent_types=[convert.agent_type_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def UpdateAgentType(
        self, request: pb.UpdateAgentTypeRequest, context: Context
    ) -> pb.UpdateAgentTypeResponse:
        agent_type = await self._registry.update_agent_type(
            request.agent_type.id,
            convert.agent_type_fields(request.agent_type),
            request.update_mask.paths,
            by=caller().user_id,
        )
        return pb.UpdateAgentTypeResponse(
            agent_type=convert.agent_type_message(agent_type),
            warnings=await self._registry.agent_type_warnings(agent_type),
        )

    async def DeleteAgentType(
        self, request: pb.DeleteAgentTypeRequest, context: Context
    ) -> pb.DeleteAgentTypeResponse:
        await self._registry.delete_agent_type(request.id)
        return pb.DeleteAgentTypeResponse()


class AgentRpcs:
    """Adapts the agent RPCs, lifecycle and metrics included, to `AgentRegistry`."""

    _registry: AgentRegistry

    async def CreateAgent(self, request: pb.CreateAgentRequest, context: Context) -> pb.CreateAgentResponse:
        agent = await self._registry.create_agent(
            caller(),
            convert.new_agent(request.agent),
            request_id=request.request_id,
            replace_terminated=request.replace_terminated,
        )
        return pb.CreateAgentResponse(
            agent=convert.agent_message(agent), warnings=await self._registry.agent_warnings(agent)
        )

    async def GetAgent(self, request: pb.GetAgentRequest, context: Context) -> pb.GetAgentResponse:
        agent = await self._registry.get_agent(caller(), request.project_id, request.id)
        return pb.GetAgentResponse(agent=convert.agent_message(agent))

    async def ListAgents(self, request: pb.ListAgentsRequest, context: Context) -> pb.ListAgentsResponse:
        page = await self._registry.list_agents(
            caller(),
            request.project_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListAgentsResponse(
            agents=[convert.agent_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def UpdateAgent(self, request: pb.UpdateAgentRequest, context: Context) -> pb.UpdateAgentResponse:
        agent = await self._registry.update_agent(
            caller(),
            request.agent.project_id,
            request.agent.id,
            convert.agent_config(request.agent.config),
            request.update_mask.paths,
            public=request.agent.public,
        )
        return pb.UpdateAgentResponse(
            agent=convert.agent_message(agent), warnings=await self._registry.agent_warnings(agent)
        )

    async def PauseAgent(self, request: pb.PauseAgentRequest, context: Context) -> pb.PauseAgentResponse:
        agent = await self._registry.pause_agent(caller(), request.project_id, request.id)
        return pb.PauseAgentResponse(agent=convert.agent_message(agent))

    async def ResumeAgent(self, request: pb.ResumeAgentRequest, context: Context) -> pb.ResumeAgentResponse:
        agent = await self._registry.resume_agent(caller(), request.project_id, request.id)
        return pb.ResumeAgentResponse(agent=convert.agent_message(agent))

    async def DeleteAgent(self, request: pb.DeleteAgentRequest, context: Context) -> pb.DeleteAgentResponse:
        agent = await self._registry.terminate_agent(caller(), request.project_id, request.id)
        return pb.DeleteAgentResponse(message=f"agent {agent.name!r} terminated")

    async def GetAgentMetrics(
        self, request: pb.GetAgentMetricsRequest, context: Context
    ) -> pb.GetAgentMetricsResponse:
        metrics = await self._registry.agent_metrics(caller(), request.project_id, request.id)
        return convert.metrics_response(metrics)

    async def ListAgentVersions(
        self, request: pb.ListAgentVersionsRequest, context: Context
    ) -> pb.ListAgentVersionsResponse:
        page = await self._registry.list_agent_versions(
            caller(),
            request.project_id,
            request.agent_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListAgentVersionsResponse(
            versions=[convert.agent_version_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def GetAgentVersion(
        self, request: pb.GetAgentVersionRequest, context: Context
    ) -> pb.GetAgentVersionResponse:
        version = await self._registry.get_agent_version(
            caller(), request.project_id, request.agent_id, request.number
        )
        return pb.GetAgentVersionResponse(version=convert.agent_version_message(version))

    async def DiffAgentVersions(
        self, request: pb.DiffAgentVersionsRequest, context: Context
    ) -> pb.DiffAgentVersionsResponse:
        changes = await self._registry.diff_agent_versions(
            caller(), request.project_id, request.agent_id, request.number, request.against
        )
        return pb.DiffAgentVersionsResponse(
            changes=[
                pb.AgentVersionChange(
                    field=change.field,
                    before=json_format.ParseDict(change.before, struct_pb2.Value()),
                    after=json_format.ParseDict(change.after, struct_pb2.Value()),
                )
                for change in changes
            ]
        )

    async def RestoreAgentVersion(
        self, request: pb.RestoreAgentVersionRequest, context: Context
    ) -> pb.RestoreAgentVersionResponse:
        agent, version = await self._registry.restore_agent_version(
            caller(), request.project_id, request.agent_id, request.number
        )
        return pb.RestoreAgentVersionResponse(
            agent=convert.agent_message(agent), version=convert.agent_version_message(version)
        )

    async def MoveSession(self, request: pb.MoveSessionRequest, context: Context) -> pb.MoveSessionResponse:
        pins = await self._registry.move_session(
            caller(),
            request.project_id,
            request.session_id,
            agent_ref=request.agent_id,
            version=request.version,
            latest=request.latest,
        )
        return pb.MoveSessionResponse(
            versions=[
                resources_pb2.SessionAgentVersion(agent_id=agent_id, version=number)
                for agent_id, number in sorted(pins.items())
            ]
        )

    async def MoveAgentSessions(
        self, request: pb.MoveAgentSessionsRequest, context: Context
    ) -> pb.MoveAgentSessionsResponse:
        moved = await self._registry.move_agent_sessions(
            caller(), request.project_id, request.agent_id, version=request.version, latest=request.latest
        )
        return pb.MoveAgentSessionsResponse(
            agent_id=moved.agent_id,
            version=moved.version,
            moved_sessions=moved.moved,
            sessions=moved.sessions,
        )
