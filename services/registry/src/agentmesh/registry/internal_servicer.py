"""RegistryInternalService over gRPC: what the mesh's own services ask of the registry (resolving
agents, run starts and ends, leases, MCP servers' secrets, executor pool membership). Proto in,
proto out, like `servicer.py`; only mesh services reach it (the service identity interceptor,
`app.py`), acting for the user whose token they carry or as the system principal."""

from __future__ import annotations

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as pb_grpc
from agentmesh.registry import convert
from agentmesh.registry.leases import RunLeases
from agentmesh.registry.mcp_servers import McpServerRegistry
from agentmesh.registry.models import FinishedRun
from agentmesh.registry.registry import AgentRegistry
from agentmesh.registry.servicer import caller

Context = grpc.aio.ServicerContext


class RegistryInternalServicer(pb_grpc.RegistryInternalServiceServicer):
    """Adapts RegistryInternalService RPCs to the registry's rules and run leases."""

    def __init__(self, registry: AgentRegistry, mcp_servers: McpServerRegistry, leases: RunLeases) -> None:
        self._registry = registry
        self._mcp_servers = mcp_servers
        self._leases = leases

    async def ResolveAgent(
        self, request: pb.ResolveAgentRequest, context: Context
    ) -> pb.ResolveAgentResponse:
        spec = await self._registry.resolve_agent(caller(), request.project_slug, request.agent_name)
        return pb.ResolveAgentResponse(spec=convert.agent_spec_message(spec))

    async def StartAgentRun(
        self, request: pb.StartAgentRunRequest, context: Context
    ) -> pb.StartAgentRunResponse:
        lease = self._leases.grant(request.session_id, request.executor_id)
        agent, revision = await self._registry.start_run(
            caller(), request.agent_id, request.run_id, lease=lease
        )
        return pb.StartAgentRunResponse(agent=convert.agent_message(agent), spec_revision=revision)

    async def FinishAgentRun(
        self, request: pb.FinishAgentRunRequest, context: Context
    ) -> pb.FinishAgentRunResponse:
        agent = await self._registry.finish_run(
            caller(),
            request.agent_id,
            request.run_id,
            completed=request.completed,
            tokens_used=request.tokens_used,
            cost=request.cost,
        )
        return pb.FinishAgentRunResponse(agent=convert.agent_message(agent))

    async def FinishAgentRuns(
        self, request: pb.FinishAgentRunsRequest, context: Context
    ) -> pb.FinishAgentRunsResponse:
        runs = [
            FinishedRun(
                agent_id=run.agent_id,
                run_id=run.run_id,
                completed=run.completed,
                tokens_used=run.tokens_used,
                cost=run.cost,
            )
            for run in request.runs
        ]
        results = await self._registry.finish_runs(caller(), runs)
        return pb.FinishAgentRunsResponse(results=[convert.finished_run_message(r) for r in results])

    async def RenewRunLeases(
        self, request: pb.RenewRunLeasesRequest, context: Context
    ) -> pb.RenewRunLeasesResponse:
        renewal = await self._leases.renew(
            request.executor_id,
            [(run.agent_id, run.run_id) for run in request.runs],
            closed=[(run.agent_id, run.run_id) for run in request.closed],
            max_orphans=request.max_orphans,
        )
        return convert.renewal_message(renewal)

    async def RegisterExecutor(
        self, request: pb.RegisterExecutorRequest, context: Context
    ) -> pb.RegisterExecutorResponse:
        executor = await self._registry.register_executor(request.executor.id, request.executor.address)
        return pb.RegisterExecutorResponse(executor=convert.executor_message(executor))

    async def ListExecutors(
        self, request: pb.ListExecutorsRequest, context: Context
    ) -> pb.ListExecutorsResponse:
        executors = await self._registry.list_executors()
        return pb.ListExecutorsResponse(executors=[convert.executor_message(item) for item in executors])

    async def ResolveMcpServers(
        self, request: pb.ResolveMcpServersRequest, context: Context
    ) -> pb.ResolveMcpServersResponse:
        servers, missing = await self._mcp_servers.resolve_agent_servers(request.agent_id)
        return pb.ResolveMcpServersResponse(
            servers=[convert.mcp_server_message(server, secrets=True) for server in servers], missing=missing
        )
