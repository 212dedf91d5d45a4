"""The registry's client: with `declarations` (checking writes before making them), the only
module of the registry that other services import.

Besides `RegistryClient`, it offers the registry's errors that callers act on by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import grpc
from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_pb_grpc
from agentmesh.registry.errors import (
    AgentNotFound,
    AgentPaused,
    AgentTerminated,
    AgentTypeInactive,
    AgentTypeInUse,
    InputAlreadyAnswered,
    InputRequestExpired,
    InputRequestNotFound,
    InvalidTransition,
    ProjectNotFound,
    RunNotFound,
    RunNotHeld,
)
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata, unary

# What other services use of the registry besides the client: the errors they act on.
__all__ = [
    "AgentNotFound",
    "AgentPaused",
    "AgentTerminated",
    "AgentTypeInUse",
    "AgentTypeInactive",
    "InputAlreadyAnswered",
    "InputRequestExpired",
    "InputRequestNotFound",
    "InvalidTransition",
    "ProjectNotFound",
    "RegistryClient",
    "RunNotFound",
    "RunNotHeld",
]


def _mask(paths: Iterable[str]) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


class RegistryClient:
    """Typed calls to the registry; failures raise the DomainError the registry raised.

    Every call takes `metadata` (the caller's `authorization: Bearer …`); inside a service, the
    shared client interceptor forwards the current caller's token when none is given. The internal
    calls need the channel to carry this service's credential (`runtime.channels.PeerSecurity`).
    """

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.RegistryServiceStub(channel)
        self.internal_stub = internal_pb_grpc.RegistryInternalServiceStub(channel)

    # --- What executors and gateways call (RegistryInternalService) ------------------------

    async def resolve_agent(
        self, project_slug: str, agent_name: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.AgentSpec:
        request = internal_pb.ResolveAgentRequest(project_slug=project_slug, agent_name=agent_name)
        response = await unary(self.internal_stub.ResolveAgent, request, metadata=metadata)
        return response.spec

    async def resolve_remote_agent(
        self, project_id: str, name: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.RemoteAgent:
        """A project's remote A2A agent with its credential (the system principal only)."""
        request = internal_pb.ResolveRemoteAgentRequest(project_id=project_id, name=name)
        return (await unary(self.internal_stub.ResolveRemoteAgent, request, metadata=metadata)).remote_agent

    async def start_agent_run(
        self,
        agent_id: str,
        run_id: str,
        *,
        session_id: str = "",
        executor_id: str = "",
        double_texting: str = "",
        metadata: Metadata | None = None,
    ) -> internal_pb.StartAgentRunResponse:
        """The agent, working, and its spec's revision now; `executor_id` holds the run's lease.
        With `double_texting` the run is its session's next turn (`runs_ahead`: the turns it
        waits for); under reject, Aborted (SESSION_BUSY) when a turn is in flight."""
        request = internal_pb.StartAgentRunRequest(
            agent_id=agent_id,
            run_id=run_id,
            session_id=session_id,
            executor_id=executor_id,
            double_texting=double_texting,
        )
        return await unary(self.internal_stub.StartAgentRun, request, metadata=metadata)

    async def await_session_turn(
        self, agent_id: str, run_id: str, *, wait_seconds: float, metadata: Metadata | None = None
    ) -> list[str]:
        """The session's turns still in flight before the run, once none is left or after
        `wait_seconds` (the call's deadline is a little longer)."""
        request = internal_pb.AwaitSessionTurnRequest(
            agent_id=agent_id, run_id=run_id, wait_seconds=wait_seconds
        )
        response = await unary(
            self.internal_stub.AwaitSessionTurn, request, metadata=metadata, timeout=wait_seconds + 5.0
        )
        return list(response.runs_ahead)

    async def finish_agent_run(
        self,
        agent_id: str,
        run_id: str,
        *,
        completed: bool,
        tokens_used: int = 0,
        cost: float = 0.0,
        metadata: Metadata | None = None,
    ) -> resources_pb2.Agent:
        request = internal_pb.FinishAgentRunRequest(
            agent_id=agent_id, run_id=run_id, completed=completed, tokens_used=tokens_used, cost=cost
        )
        return (await unary(self.internal_stub.FinishAgentRun, request, metadata=metadata)).agent

    async def finish_agent_runs(
        self, runs: Iterable[internal_pb.FinishAgentRunRequest], *, metadata: Metadata | None = None
    ) -> list[internal_pb.FinishedAgentRun]:
        """Finishes several runs in one call; a refused run says why in its result."""
        request = internal_pb.FinishAgentRunsRequest(runs=list(runs))
        return list((await unary(self.internal_stub.FinishAgentRuns, request, metadata=metadata)).results)

    async def resolve_mcp_servers(
        self, agent_id: str, *, metadata: Metadata | None = None
    ) -> internal_pb.ResolveMcpServersResponse:
        """The agent's MCP servers with their secrets, and the names no registered server has
        (the system principal only)."""
        request = internal_pb.ResolveMcpServersRequest(agent_id=agent_id)
        return await unary(self.internal_stub.ResolveMcpServers, request, metadata=metadata)

    async def renew_run_leases(
        self,
        request: internal_pb.RenewRunLeasesRequest,
        *,
        metadata: Metadata | None = None,
        timeout: float | None = None,
    ) -> internal_pb.RenewRunLeasesResponse:
        """Renews an executor's run leases, forgets the orphans it closed, hands it new ones."""
        return await unary(self.internal_stub.RenewRunLeases, request, metadata=metadata, timeout=timeout)

    async def suspend_run(
        self,
        agent_id: str,
        run_id: str,
        *,
        executor_id: str,
        requests: Sequence[run_pb2.InputRequest],
        metadata: Metadata | None = None,
    ) -> list[run_pb2.InputRequest]:
        """Parks a run `executor_id` holds until a person answers its requests for input (the
        system principal only); the requests as stored — one stored already keeps its state and
        response. Once none is pending, a renewal hands the run out as an orphan carrying them."""
        request = internal_pb.SuspendRunRequest(
            agent_id=agent_id, run_id=run_id, executor_id=executor_id, input_requests=list(requests)
        )
        return list((await unary(self.internal_stub.SuspendRun, request, metadata=metadata)).input_requests)

    async def register_executor(
        self,
        executor_id: str,
        address: str,
        *,
        tools: Sequence[str] = (),
        model_providers: Sequence[tuple[str, str]] = (),
        metadata: Metadata | None = None,
    ) -> resources_pb2.Executor:
        """Reports an executor in (its heartbeat) with its function tools and its model providers,
        each as (name, what keeps it from answering or "")."""
        executor = resources_pb2.Executor(
            id=executor_id,
            address=address,
            tools=tools,
            model_providers=[resources_pb2.ModelProvider(name=n, problem=p) for n, p in model_providers],
        )
        request = internal_pb.RegisterExecutorRequest(executor=executor)
        return (await unary(self.internal_stub.RegisterExecutor, request, metadata=metadata)).executor

    async def list_executors(self, *, metadata: Metadata | None = None) -> list[resources_pb2.Executor]:
        response = await unary(
            self.internal_stub.ListExecutors, internal_pb.ListExecutorsRequest(), metadata=metadata
        )
        return list(response.executors)

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
        metadata: Metadata | None = None,
        warnings: list[str] | None = None,
    ) -> resources_pb2.Agent:
        """Spawns an agent; the registry's warnings about it are added to `warnings`."""
        request = pb.CreateAgentRequest(agent=agent, request_id=request_id)
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


def _collect(found: Iterable[str], into: list[str] | None) -> None:
    if into is not None:
        into.extend(found)
