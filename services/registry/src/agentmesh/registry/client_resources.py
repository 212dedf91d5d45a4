"""The registry's public resources, as calls: users and their tokens and API keys, agent types,
projects, agents, MCP servers and the requests for a person's input. `RegistryClient` offers
them beside the calls executors and gateways make; this module only keeps the client's parts
apart (each under the size of a module that reads in one sitting)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata, unary


def _mask(paths: Iterable[str]) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


class ResourceCalls:
    """Typed calls to the registry's public service (RegistryService)."""

    stub: pb_grpc.RegistryServiceStub

    # --- Users -------------------------------------------------------------------------------

    async def register_user(
        self, email: str, password: str, *, first_name: str = "", last_name: str = ""
    ) -> resources_pb2.User:
        request = pb.RegisterUserRequest(
            email=email, password=password, first_name=first_name, last_name=last_name
        )
        return (await unary(self.stub.RegisterUser, request)).user

    async def create_user(
        self,
        email: str,
        password: str,
        *,
        first_name: str = "",
        last_name: str = "",
        is_superuser: bool = False,
        metadata: Metadata | None = None,
    ) -> pb.CreateUserResponse:
        """A user made by a superuser (the caller); `promoted` when an existing one became superuser."""
        request = pb.CreateUserRequest(
            email=email,
            password=password,
            first_name=first_name,
            last_name=last_name,
            is_superuser=is_superuser,
        )
        return await unary(self.stub.CreateUser, request, metadata=metadata)

    async def login(self, email: str, password: str) -> pb.Tokens:
        return (await unary(self.stub.Login, pb.LoginRequest(email=email, password=password))).tokens

    async def refresh_tokens(self, refresh_token: str) -> pb.Tokens:
        request = pb.RefreshTokensRequest(refresh_token=refresh_token)
        return (await unary(self.stub.RefreshTokens, request)).tokens

    async def revoke_refresh_token(self, refresh_token: str) -> None:
        await unary(self.stub.RevokeRefreshToken, pb.RevokeRefreshTokenRequest(refresh_token=refresh_token))

    async def create_api_key(
        self,
        name: str,
        *,
        project_id: str = "",
        expires_at: datetime | None = None,
        metadata: Metadata | None = None,
    ) -> pb.CreateApiKeyResponse:
        """The new key's description and its secret (shown this once)."""
        request = pb.CreateApiKeyRequest(name=name, project_id=project_id)
        if expires_at is not None:
            request.expires_at.FromDatetime(expires_at)
        return await unary(self.stub.CreateApiKey, request, metadata=metadata)  # type: ignore[no-any-return]

    async def list_api_keys(self, *, metadata: Metadata | None = None) -> list[resources_pb2.ApiKey]:
        """All the caller's keys, page after page."""
        keys: list[resources_pb2.ApiKey] = []
        request = pb.ListApiKeysRequest(page_size=1000)
        while True:
            page = await unary(self.stub.ListApiKeys, request, metadata=metadata)
            keys.extend(page.api_keys)
            if not page.next_page_token:
                return keys
            request.page_token = page.next_page_token

    async def revoke_api_key(self, key_id: str, *, metadata: Metadata | None = None) -> None:
        await unary(self.stub.RevokeApiKey, pb.RevokeApiKeyRequest(id=key_id), metadata=metadata)

    async def create_invitation(
        self, *, ttl_seconds: int = 0, metadata: Metadata | None = None
    ) -> pb.CreateInvitationResponse:
        """A new invitation to register and its token (shown this once)."""
        request = pb.CreateInvitationRequest(ttl_seconds=ttl_seconds)
        return await unary(self.stub.CreateInvitation, request, metadata=metadata)  # type: ignore[no-any-return]

    async def list_invitations(self, *, metadata: Metadata | None = None) -> list[resources_pb2.Invitation]:
        """Every invitation, page after page."""
        invitations: list[resources_pb2.Invitation] = []
        request = pb.ListInvitationsRequest(page_size=1000)
        while True:
            page = await unary(self.stub.ListInvitations, request, metadata=metadata)
            invitations.extend(page.invitations)
            if not page.next_page_token:
                return invitations
            request.page_token = page.next_page_token

    async def revoke_invitation(self, invitation_id: str, *, metadata: Metadata | None = None) -> None:
        request = pb.RevokeInvitationRequest(id=invitation_id)
        await unary(self.stub.RevokeInvitation, request, metadata=metadata)

    async def get_current_user(self, *, metadata: Metadata | None = None) -> resources_pb2.User:
        return (await unary(self.stub.GetCurrentUser, pb.GetCurrentUserRequest(), metadata=metadata)).user

    # --- Agent types -------------------------------------------------------------------------

    async def create_agent_type(
        self,
        agent_type: resources_pb2.AgentType,
        *,
        request_id: str = "",
        metadata: Metadata | None = None,
        warnings: list[str] | None = None,
    ) -> resources_pb2.AgentType:
        """Creates a type; the registry's warnings about it are added to `warnings`."""
        request = pb.CreateAgentTypeRequest(agent_type=agent_type, request_id=request_id)
        response = await unary(self.stub.CreateAgentType, request, metadata=metadata)
        _collect(response.warnings, warnings)
        return response.agent_type

    async def get_agent_type(
        self, *, agent_type_id: str = "", slug: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.AgentType:
        request = pb.GetAgentTypeRequest(id=agent_type_id, slug=slug)
        return (await unary(self.stub.GetAgentType, request, metadata=metadata)).agent_type

    async def list_agent_types(
        self, *, page_size: int = 0, page_token: str = "", page: int = 0, metadata: Metadata | None = None
    ) -> pb.ListAgentTypesResponse:
        request = pb.ListAgentTypesRequest(page_size=page_size, page_token=page_token, page=page)
        return await unary(self.stub.ListAgentTypes, request, metadata=metadata)

    async def update_agent_type(
        self,
        agent_type: resources_pb2.AgentType,
        paths: Iterable[str],
        *,
        metadata: Metadata | None = None,
        warnings: list[str] | None = None,
    ) -> resources_pb2.AgentType:
        """Changes a type; the registry's warnings about it are added to `warnings`."""
        request = pb.UpdateAgentTypeRequest(agent_type=agent_type, update_mask=_mask(paths))
        response = await unary(self.stub.UpdateAgentType, request, metadata=metadata)
        _collect(response.warnings, warnings)
        return response.agent_type

    async def delete_agent_type(self, agent_type_id: str, *, metadata: Metadata | None = None) -> None:
        await unary(self.stub.DeleteAgentType, pb.DeleteAgentTypeRequest(id=agent_type_id), metadata=metadata)

    # --- Projects ----------------------------------------------------------------------------

    async def create_project(
        self, project: resources_pb2.Project, *, request_id: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.Project:
        request = pb.CreateProjectRequest(project=project, request_id=request_id)
        return (await unary(self.stub.CreateProject, request, metadata=metadata)).project

    async def get_project(
        self, *, project_id: str = "", slug: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.Project:
        request = pb.GetProjectRequest(id=project_id, slug=slug)
        return (await unary(self.stub.GetProject, request, metadata=metadata)).project

    async def list_projects(
        self, *, page_size: int = 0, page_token: str = "", page: int = 0, metadata: Metadata | None = None
    ) -> pb.ListProjectsResponse:
        request = pb.ListProjectsRequest(page_size=page_size, page_token=page_token, page=page)
        return await unary(self.stub.ListProjects, request, metadata=metadata)

    async def update_project(
        self, project: resources_pb2.Project, paths: Iterable[str], *, metadata: Metadata | None = None
    ) -> resources_pb2.Project:
        request = pb.UpdateProjectRequest(project=project, update_mask=_mask(paths))
        return (await unary(self.stub.UpdateProject, request, metadata=metadata)).project

    async def delete_project(self, project_id: str, *, metadata: Metadata | None = None) -> None:
        await unary(self.stub.DeleteProject, pb.DeleteProjectRequest(id=project_id), metadata=metadata)

    # --- Agents ------------------------------------------------------------------------------

    async def create_agent(
        self,
        agent: resources_pb2.Agent,
        *,
        request_id: str = "",
        replace_terminated: bool = False,
        metadata: Metadata | None = None,
        warnings: list[str] | None = None,
    ) -> resources_pb2.Agent:
        """Spawns an agent (in place of a terminated one of its name with `replace_terminated`);
        the registry's warnings about it are added to `warnings`."""
        request = pb.CreateAgentRequest(
            agent=agent, request_id=request_id, replace_terminated=replace_terminated
        )
        response = await unary(self.stub.CreateAgent, request, metadata=metadata)
        _collect(response.warnings, warnings)
        return response.agent

    async def get_agent(
        self, project_id: str, agent_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Agent:
        request = pb.GetAgentRequest(project_id=project_id, id=agent_id)
        return (await unary(self.stub.GetAgent, request, metadata=metadata)).agent

    async def list_agents(
        self,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
        metadata: Metadata | None = None,
    ) -> pb.ListAgentsResponse:
        request = pb.ListAgentsRequest(
            project_id=project_id, page_size=page_size, page_token=page_token, page=page
        )
        return await unary(self.stub.ListAgents, request, metadata=metadata)

    async def update_agent(
        self,
        agent: resources_pb2.Agent,
        paths: Iterable[str],
        *,
        metadata: Metadata | None = None,
        warnings: list[str] | None = None,
    ) -> resources_pb2.Agent:
        """Changes config overrides: paths `config` or `config.<field>`; agent carries project_id and
        id. The registry's warnings about the result are added to `warnings`."""
        request = pb.UpdateAgentRequest(agent=agent, update_mask=_mask(paths))
        response = await unary(self.stub.UpdateAgent, request, metadata=metadata)
        _collect(response.warnings, warnings)
        return response.agent

    async def pause_agent(
        self, project_id: str, agent_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Agent:
        request = pb.PauseAgentRequest(project_id=project_id, id=agent_id)
        return (await unary(self.stub.PauseAgent, request, metadata=metadata)).agent

    async def resume_agent(
        self, project_id: str, agent_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Agent:
        request = pb.ResumeAgentRequest(project_id=project_id, id=agent_id)
        return (await unary(self.stub.ResumeAgent, request, metadata=metadata)).agent

    async def delete_agent(self, project_id: str, agent_id: str, *, metadata: Metadata | None = None) -> str:
        """Terminates the agent; returns the confirmation message."""
        request = pb.DeleteAgentRequest(project_id=project_id, id=agent_id)
        return (await unary(self.stub.DeleteAgent, request, metadata=metadata)).message

    async def get_agent_metrics(
        self, project_id: str, agent_id: str, *, metadata: Metadata | None = None
    ) -> pb.GetAgentMetricsResponse:
        request = pb.GetAgentMetricsRequest(project_id=project_id, id=agent_id)
        return await unary(self.stub.GetAgentMetrics, request, metadata=metadata)

    async def list_agent_versions(
        self,
        project_id: str,
        agent_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        metadata: Metadata | None = None,
    ) -> pb.ListAgentVersionsResponse:
        """One page of the agent's versions, newest first."""
        request = pb.ListAgentVersionsRequest(
            project_id=project_id, agent_id=agent_id, page_size=page_size, page_token=page_token
        )
        return await unary(self.stub.ListAgentVersions, request, metadata=metadata)

    async def diff_agent_versions(
        self,
        project_id: str,
        agent_id: str,
        number: int,
        *,
        against: int = 0,
        metadata: Metadata | None = None,
    ) -> pb.DiffAgentVersionsResponse:
        """The fields that differ from version `against` (0: the one before) to version `number`."""
        request = pb.DiffAgentVersionsRequest(
            project_id=project_id, agent_id=agent_id, number=number, against=against
        )
        return await unary(self.stub.DiffAgentVersions, request, metadata=metadata)

    async def restore_agent_version(
        self, project_id: str, agent_id: str, number: int, *, metadata: Metadata | None = None
    ) -> pb.RestoreAgentVersionResponse:
        """Rolls the agent back to version `number` (a new version with its config)."""
        request = pb.RestoreAgentVersionRequest(project_id=project_id, agent_id=agent_id, number=number)
        return await unary(self.stub.RestoreAgentVersion, request, metadata=metadata)

    async def move_session(
        self,
        project_id: str,
        session_id: str,
        *,
        agent_id: str = "",
        version: int = 0,
        latest: bool = False,
        metadata: Metadata | None = None,
    ) -> pb.MoveSessionResponse:
        """Moves the session's runs of an agent to one of its versions (or to its latest)."""
        request = pb.MoveSessionRequest(
            project_id=project_id, session_id=session_id, agent_id=agent_id, version=version, latest=latest
        )
        return await unary(self.stub.MoveSession, request, metadata=metadata)

    async def move_agent_sessions(
        self,
        project_id: str,
        agent_id: str,
        *,
        version: int = 0,
        latest: bool = False,
        metadata: Metadata | None = None,
    ) -> pb.MoveAgentSessionsResponse:
        """Moves every session of the agent to one of its versions (or to its latest)."""
        request = pb.MoveAgentSessionsRequest(
            project_id=project_id, agent_id=agent_id, version=version, latest=latest
        )
        return await unary(self.stub.MoveAgentSessions, request, metadata=metadata)

    async def summarize_usage(
        self,
        project_id: str,
        group_by: Sequence[pb.UsageDimension.ValueType] = (),
        *,
        start_day: str = "",
        end_day: str = "",
        metadata: Metadata | None = None,
    ) -> pb.SummarizeUsageResponse:
        """The project's spending from the cost ledger, summed per group of `group_by`."""
        request = pb.SummarizeUsageRequest(
            project_id=project_id, group_by=list(group_by), start_day=start_day, end_day=end_day
        )
        return await unary(self.stub.SummarizeUsage, request, metadata=metadata)

    # --- MCP servers (superusers) -----------------------------------------------------------

    async def create_mcp_server(
        self, server: resources_pb2.McpServer, *, request_id: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.McpServer:
        request = pb.CreateMcpServerRequest(mcp_server=server, request_id=request_id)
        return (await unary(self.stub.CreateMcpServer, request, metadata=metadata)).mcp_server

    async def get_mcp_server(
        self,
        *,
        mcp_server_id: str = "",
        name: str = "",
        project_id: str = "",
        metadata: Metadata | None = None,
    ) -> resources_pb2.McpServer:
        """By id, or by name and project (none for a global server)."""
        request = pb.GetMcpServerRequest(id=mcp_server_id, name=name, project_id=project_id)
        return (await unary(self.stub.GetMcpServer, request, metadata=metadata)).mcp_server

    async def list_mcp_servers(
        self,
        *,
        project_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
        metadata: Metadata | None = None,
    ) -> pb.ListMcpServersResponse:
        request = pb.ListMcpServersRequest(
            project_id=project_id, page_size=page_size, page_token=page_token, page=page
        )
        return await unary(self.stub.ListMcpServers, request, metadata=metadata)

    async def update_mcp_server(
        self, server: resources_pb2.McpServer, paths: Iterable[str], *, metadata: Metadata | None = None
    ) -> resources_pb2.McpServer:
        request = pb.UpdateMcpServerRequest(mcp_server=server, update_mask=_mask(paths))
        return (await unary(self.stub.UpdateMcpServer, request, metadata=metadata)).mcp_server

    async def delete_mcp_server(self, mcp_server_id: str, *, metadata: Metadata | None = None) -> None:
        await unary(self.stub.DeleteMcpServer, pb.DeleteMcpServerRequest(id=mcp_server_id), metadata=metadata)

    # --- Requests for a person's input ------------------------------------------------------

    async def list_input_requests(
        self,
        project_id: str,
        *,
        session_id: str = "",
        state: run_pb2.InputRequestState.ValueType = run_pb2.INPUT_REQUEST_STATE_UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        metadata: Metadata | None = None,
    ) -> pb.ListInputRequestsResponse:
        """One page of the project's (or a session's) requests in `state` (unset: pending), oldest first."""
        request = pb.ListInputRequestsRequest(
            project_id=project_id,
            session_id=session_id,
            state=state,
            page_size=page_size,
            page_token=page_token,
        )
        return await unary(self.stub.ListInputRequests, request, metadata=metadata)

    async def get_input_request(
        self, project_id: str, request_id: str, *, metadata: Metadata | None = None
    ) -> run_pb2.InputRequest:
        request = pb.GetInputRequestRequest(project_id=project_id, id=request_id)
        return (await unary(self.stub.GetInputRequest, request, metadata=metadata)).input_request

    async def respond_to_input_request(
        self,
        project_id: str,
        request_id: str,
        response: run_pb2.InputResponse,
        *,
        metadata: Metadata | None = None,
    ) -> run_pb2.InputRequest:
        """The request, answered; FailedPrecondition (INPUT_ALREADY_ANSWERED, INPUT_REQUEST_EXPIRED)
        when it has its one response already."""
        request = pb.RespondToInputRequestRequest(project_id=project_id, id=request_id, response=response)
        return (await unary(self.stub.RespondToInputRequest, request, metadata=metadata)).input_request

    async def cancel_waiting_run(
        self, project_id: str, request_id: str, *, reason: str = "", metadata: Metadata | None = None
    ) -> pb.CancelWaitingRunResponse:
        """Cancels the run that waits for a pending request (and the waiting runs above and
        below it); FailedPrecondition when the request is not pending."""
        request = pb.CancelWaitingRunRequest(
            project_id=project_id, input_request_id=request_id, reason=reason
        )
        return await unary(self.stub.CancelWaitingRun, request, metadata=metadata)


def _collect(found: Iterable[str], into: list[str] | None) -> None:
    if into is not None:
        into.extend(found)
