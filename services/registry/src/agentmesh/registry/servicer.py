"""RegistryService over gRPC: proto in, proto out. No SQL and no rules here — the caller comes
from the authorization interceptor (`current_principal`), the work from `Accounts` and
`AgentRegistry`, and failures leave as DomainErrors for the shared interceptor to map."""

from __future__ import annotations

import grpc

from agentmesh.registry import convert
from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.agents.servicer import AgentRpcs, AgentTypeRpcs
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.identity.servicer import AccountRpcs, ApiKeyRpcs
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.mcp_servers.servicer import McpServerRpcs
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry
from agentmesh.registry.remote_agents.servicer import RemoteAgentRpcs
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class RegistryServicer(
    AccountRpcs,
    AgentTypeRpcs,
    AgentRpcs,
    McpServerRpcs,
    ApiKeyRpcs,
    RemoteAgentRpcs,
    pb_grpc.RegistryServiceServicer,
):
    """Adapts RegistryService RPCs to the registry's rules (the user RPCs in `AccountRpcs`, the
    agent type and agent RPCs in `AgentTypeRpcs` and `AgentRpcs`, the MCP server RPCs in
    `McpServerRpcs`, the API key RPCs in `ApiKeyRpcs`, the remote agent RPCs in `RemoteAgentRpcs`)."""

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
