"""RegistryInternalService over gRPC: what the mesh's own services ask of the registry (resolving
agents, run starts and ends, leases, suspended runs, MCP servers' secrets, executor pool
membership), and CredentialStatusService (whether an access token's user and API key still
stand) and ProjectOwnerService (who owns a project, for memory). Proto in,
proto out, like `servicer.py`; only mesh services reach it (the service identity interceptor,
`app.py`), acting for the user whose token they carry or as the system principal."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc

from agentmesh.common.v1 import credential_status_service_pb2 as status_pb
from agentmesh.common.v1 import credential_status_service_pb2_grpc as status_pb_grpc
from agentmesh.common.v1 import project_owner_service_pb2 as owner_pb
from agentmesh.common.v1 import project_owner_service_pb2_grpc as owner_pb_grpc
from agentmesh.common.v1 import run_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as pb_grpc
from agentmesh.registry import convert
from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry
from agentmesh.registry.remote_agents.servicer import remote_agent_message
from agentmesh.registry.runs import input_convert
from agentmesh.registry.runs.bookkeeping import RunBookkeeping
from agentmesh.registry.runs.executors import ExecutorPool
from agentmesh.registry.runs.input_requests import InputRequests
from agentmesh.registry.runs.leases import RunLeases
from agentmesh.registry.runs.turns import SessionTurns
from agentmesh.registry.schedules.claims import ScheduleClaims
from agentmesh.registry.schedules.servicer import ScheduleFiringRpcs
from agentmesh.registry.usage.convert import finished_run
from agentmesh.registry.webhooks.servicer import TaskPushRpcs
from agentmesh.registry.webhooks.task_push import TaskPushConfigs
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext
logger = logging.getLogger(__name__)


class RegistryInternalServicer(ScheduleFiringRpcs, TaskPushRpcs, pb_grpc.RegistryInternalServiceServicer):
    """Adapts RegistryInternalService RPCs to the registry's rules and run leases."""

    def __init__(
        self,
        registry: AgentRegistry,
        mcp_servers: McpServerRegistry,
        leases: RunLeases,
        *,
        turns: SessionTurns,
        accounts: Accounts,
        api_keys: ApiKeys,
        remote_agents: RemoteAgentRegistry,
        runs: RunBookkeeping,
        executors: ExecutorPool,
        input_requests: InputRequests,
        claims: ScheduleClaims,
        task_push: TaskPushConfigs,
    ) -> None:
        self._registry = registry
        self._task_push = task_push
        self._claims = claims
        self._runs = runs
        self._executors = executors
        self._mcp_servers = mcp_servers
        self._leases = leases
        self._turns = turns
        self._accounts = accounts
        self._api_keys = api_keys
        self._remote_agents = remote_agents
        self._input_requests = input_requests

    async def ResolveAgent(
        self, request: pb.ResolveAgentRequest, context: Context
    ) -> pb.ResolveAgentResponse:
        spec = await self._registry.resolve_agent(
            caller(), request.project_slug, request.agent_name, session_id=request.session_id
        )
        return pb.ResolveAgentResponse(spec=convert.agent_spec_message(spec))

    async def ListPublicAgents(
        self, request: pb.ListPublicAgentsRequest, context: Context
    ) -> pb.ListPublicAgentsResponse:
        page = await self._registry.list_public_agents(
            page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListPublicAgentsResponse(
            specs=[convert.agent_spec_message(spec) for spec in page.items],
            next_page_token=page.next_page_token,
        )

    async def StartAgentRun(
        self, request: pb.StartAgentRunRequest, context: Context
    ) -> pb.StartAgentRunResponse:
        lease = self._leases.grant(request.session_id, request.executor_id)
        ahead: list[str] = []
        if not request.double_texting:
            started = await self._runs.start_run(
                caller(), request.agent_id, request.run_id, lease=lease, session_id=request.session_id
            )
        else:
            started, ahead = await self._turns.start_run(
                caller(),
                request.agent_id,
                request.run_id,
                session_id=request.session_id,
                policy=request.double_texting,
                lease=lease,
            )
        budget = started.project_budget
        return pb.StartAgentRunResponse(
            agent=convert.agent_message(started.agent),
            spec_revision=started.spec_revision,
            runs_ahead=ahead,
            project_budget=run_pb2.Budget(max_tokens=budget.max_tokens, max_cost=budget.max_cost),
        )

    async def AwaitSessionTurn(
        self, request: pb.AwaitSessionTurnRequest, context: Context
    ) -> pb.AwaitSessionTurnResponse:
        remaining = context.time_remaining()
        wait = (
            request.wait_seconds if remaining is None else min(request.wait_seconds, max(remaining - 0.5, 0))
        )
        ahead = await self._turns.await_turn(request.agent_id, request.run_id, wait_seconds=wait)
        return pb.AwaitSessionTurnResponse(runs_ahead=ahead)

    async def FinishAgentRun(
        self, request: pb.FinishAgentRunRequest, context: Context
    ) -> pb.FinishAgentRunResponse:
        agent = await self._runs.finish_run(caller(), finished_run(request))
        return pb.FinishAgentRunResponse(agent=convert.agent_message(agent))

    async def FinishAgentRuns(
        self, request: pb.FinishAgentRunsRequest, context: Context
    ) -> pb.FinishAgentRunsResponse:
        runs = [finished_run(run) for run in request.runs]
        results = await self._runs.finish_runs(caller(), runs)
        return pb.FinishAgentRunsResponse(results=[convert.finished_run_message(r) for r in results])

    async def RenewRunLeases(
        self, request: pb.RenewRunLeasesRequest, context: Context
    ) -> pb.RenewRunLeasesResponse:
        renewal = await self._leases.renew(
            request.executor_id,
            [(run.agent_id, run.run_id) for run in request.runs],
            closed=[(run.agent_id, run.run_id) for run in request.closed],
            max_orphans=request.max_orphans,
            released=[(run.agent_id, run.run_id) for run in request.released],
            resumed=[(run.agent_id, run.run_id) for run in request.resumed],
        )
        return convert.renewal_message(renewal)

    async def SuspendRun(self, request: pb.SuspendRunRequest, context: Context) -> pb.SuspendRunResponse:
        stored = await self._input_requests.suspend(
            request.executor_id,
            request.agent_id,
            request.run_id,
            input_convert.raised_inputs(request.input_requests),
            waits_on=list(request.waits_on_run_ids),
        )
        return pb.SuspendRunResponse(input_requests=[input_convert.input_request_message(r) for r in stored])

    async def RegisterExecutor(
        self, request: pb.RegisterExecutorRequest, context: Context
    ) -> pb.RegisterExecutorResponse:
        executor = await self._executors.register_executor(
            request.executor.id,
            request.executor.address,
            tools=request.executor.tools,
            model_providers=convert.model_providers(request.executor),
            run_slots=request.executor.run_slots,
        )
        return pb.RegisterExecutorResponse(executor=convert.executor_message(executor))

    async def ListExecutors(
        self, request: pb.ListExecutorsRequest, context: Context
    ) -> pb.ListExecutorsResponse:
        executors = await self._executors.list_executors()
        return pb.ListExecutorsResponse(executors=[convert.executor_message(item) for item in executors])

    async def ResolveMcpServers(
        self, request: pb.ResolveMcpServersRequest, context: Context
    ) -> pb.ResolveMcpServersResponse:
        servers, missing = await self._mcp_servers.resolve_agent_servers(request.agent_id)
        return pb.ResolveMcpServersResponse(
            servers=[convert.mcp_server_message(server, secrets=True) for server in servers], missing=missing
        )

    async def ResolveRemoteAgent(
        self, request: pb.ResolveRemoteAgentRequest, context: Context
    ) -> pb.ResolveRemoteAgentResponse:
        remote = await self._remote_agents.resolve(request.project_id, request.name)
        return pb.ResolveRemoteAgentResponse(remote_agent=remote_agent_message(remote, secrets=True))

    async def GetUserStatus(
        self, request: pb.GetUserStatusRequest, context: Context
    ) -> pb.GetUserStatusResponse:
        status = await self._accounts.user_status(request.user_id)
        return pb.GetUserStatusResponse(**status.model_dump())

    async def WatchAgents(
        self, request: pb.WatchAgentsRequest, context: Context
    ) -> AsyncIterator[pb.WatchAgentsResponse]:
        async with self._registry.watch.watch() as watcher:
            logger.info("executor %r watches agents' changes", request.executor_id)
            while (batch := await watcher.take()) is not None:
                yield pb.WatchAgentsResponse(
                    reset=batch.reset,
                    changes=[convert.agent_change_message(c) for c in batch.changes],
                    runs_ready=batch.runs_ready,
                )

    async def AuthenticateApiKey(
        self, request: pb.AuthenticateApiKeyRequest, context: Context
    ) -> pb.AuthenticateApiKeyResponse:
        key, user = await self._api_keys.authenticate(request.secret)
        return pb.AuthenticateApiKeyResponse(
            api_key=convert.api_key_message(key),
            user=convert.user_message(user),
            token_version=user.token_version,
        )


class CredentialStatusServicer(status_pb_grpc.CredentialStatusServiceServicer):
    """Answers the services that verify access tokens whether a token's user and API key still
    stand (runtime/revocation.py); only mesh services reach it, as the system principal."""

    def __init__(self, api_keys: ApiKeys) -> None:
        self._api_keys = api_keys

    async def GetCredentialStatus(
        self, request: status_pb.GetCredentialStatusRequest, context: Context
    ) -> status_pb.GetCredentialStatusResponse:
        status = await self._api_keys.credential_status(request.user_id, request.api_key_id)
        return status_pb.GetCredentialStatusResponse(
            user_active=status.user_active,
            token_version=status.token_version,
            api_key_active=status.api_key_active,
        )


class ProjectOwnerServicer(owner_pb_grpc.ProjectOwnerServiceServicer):
    """Tells memory who owns a project, so it never has to take a caller's word for it, and the
    project's stored_bytes limit in force, which memory enforces; only mesh services reach it, as
    the system principal."""

    def __init__(self, projects: ProjectRegistry) -> None:
        self._projects = projects

    async def GetProjectOwner(
        self, request: owner_pb.GetProjectOwnerRequest, context: Context
    ) -> owner_pb.GetProjectOwnerResponse:
        return owner_pb.GetProjectOwnerResponse(owner_id=await self._projects.owner_of(request.project_id))

    async def GetProjectStoredBytesLimit(
        self, request: owner_pb.GetProjectStoredBytesLimitRequest, context: Context
    ) -> owner_pb.GetProjectStoredBytesLimitResponse:
        limit = await self._projects.stored_bytes_limit(request.project_id)
        return owner_pb.GetProjectStoredBytesLimitResponse(stored_bytes=limit)
