"""RegistryService over gRPC: proto in, proto out. No SQL and no rules here — the caller comes
from the authorization interceptor (`current_principal`), the work from `Accounts` and
`AgentRegistry`, and failures leave as DomainErrors for the shared interceptor to map."""

from __future__ import annotations

import grpc

from agentmesh.registry import convert
from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.identity.servicer import ApiKeyRpcs
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.mcp_servers.servicer import McpServerRpcs
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry
from agentmesh.registry.remote_agents.servicer import RemoteAgentRpcs
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class RegistryServicer(McpServerRpcs, ApiKeyRpcs, RemoteAgentRpcs, pb_grpc.RegistryServiceServicer):
    """Adapts RegistryService RPCs to the registry's rules (the MCP server RPCs in `McpServerRpcs`,
    the API key RPCs in `ApiKeyRpcs`, the remote agent RPCs in `RemoteAgentRpcs`)."""

    def __init__(
        self,
        accounts: Accounts,
        registry: AgentRegistry,
        mcp_servers: McpServerRegistry,
        api_keys: ApiKeys,
        remote_agents: RemoteAgentRegistry,
    ) -> None:
        self._accounts = accounts
        self._api_keys = api_keys
        self._registry = registry
        self._mcp_servers = mcp_servers
        self._remote_agents = remote_agents

    # Users.

    async def RegisterUser(
        self, request: pb.RegisterUserRequest, context: Context
    ) -> pb.RegisterUserResponse:
        user = await self._accounts.register(
            email=request.email,
            password=request.password,
            first_name=request.first_name,
            last_name=request.last_name,
        )
        return pb.RegisterUserResponse(user=convert.user_message(user))

    async def Login(self, request: pb.LoginRequest, context: Context) -> pb.LoginResponse:
        tokens = await self._accounts.login(email=request.email, password=request.password)
        return pb.LoginResponse(tokens=convert.tokens_message(tokens))

    async def RefreshTokens(
        self, request: pb.RefreshTokensRequest, context: Context
    ) -> pb.RefreshTokensResponse:
        tokens = await self._accounts.refresh(request.refresh_token)
        return pb.RefreshTokensResponse(tokens=convert.tokens_message(tokens))

    async def RevokeRefreshToken(
        self, request: pb.RevokeRefreshTokenRequest, context: Context
    ) -> pb.RevokeRefreshTokenResponse:
        await self._accounts.revoke(request.refresh_token)
        return pb.RevokeRefreshTokenResponse()

    async def GetCurrentUser(
        self, request: pb.GetCurrentUserRequest, context: Context
    ) -> pb.GetCurrentUserResponse:
        user = await self._accounts.current_user(caller())
        return pb.GetCurrentUserResponse(user=convert.user_message(user))

    async def CreateUser(self, request: pb.CreateUserRequest, context: Context) -> pb.CreateUserResponse:
        created = await self._accounts.create_user(
            email=request.email,
            password=request.password,
            first_name=request.first_name,
            last_name=request.last_name,
            is_superuser=request.is_superuser,
        )
        return pb.CreateUserResponse(user=convert.user_message(created.user), promoted=created.promoted)

    async def UpdateUser(self, request: pb.UpdateUserRequest, context: Context) -> pb.UpdateUserResponse:
        user = await self._accounts.update_user(
            caller(),
            request.user.id,
            mask=list(request.update_mask.paths),
            is_active=request.user.is_active,
            is_superuser=request.user.is_superuser,
        )
        return pb.UpdateUserResponse(user=convert.user_message(user))

    # Agent types.

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

    # Projects.

    async def CreateProject(
        self, request: pb.CreateProjectRequest, context: Context
    ) -> pb.CreateProjectResponse:
        project = await self._registry.create_project(
            caller(), convert.project_fields(request.project), request_id=request.request_id
        )
        return pb.CreateProjectResponse(project=convert.project_message(project))

    async def GetProject(self, request: pb.GetProjectRequest, context: Context) -> pb.GetProjectResponse:
        project = await self._registry.get_project(caller(), project_id=request.id, slug=request.slug)
        return pb.GetProjectResponse(project=convert.project_message(project))

    async def ListProjects(
        self, request: pb.ListProjectsRequest, context: Context
    ) -> pb.ListProjectsResponse:
        page = await self._registry.list_projects(
            caller(), page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListProjectsResponse(
            projects=[convert.project_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def UpdateProject(
        self, request: pb.UpdateProjectRequest, context: Context
    ) -> pb.UpdateProjectResponse:
        project = await self._registry.update_project(
            caller(), request.project.id, convert.project_fields(request.project), request.update_mask.paths
        )
        return pb.UpdateProjectResponse(project=convert.project_message(project))

    async def DeleteProject(
        self, request: pb.DeleteProjectRequest, context: Context
    ) -> pb.DeleteProjectResponse:
        await self._registry.delete_project(caller(), request.id)
        return pb.DeleteProjectResponse()

    # Agents.

    async def CreateAgent(self, request: pb.CreateAgentRequest, context: Context) -> pb.CreateAgentResponse:
        agent = await self._registry.create_agent(
            caller(), convert.new_agent(request.agent), request_id=request.request_id
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
