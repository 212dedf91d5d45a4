"""The registry's client: the only module of the registry that other services import."""

from __future__ import annotations

import grpc

from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.client import Metadata, unary


class RegistryClient:
    """Typed calls to the registry; failures raise the DomainError the registry raised."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.RegistryServiceStub(channel)

    async def resolve_agent(
        self, project_slug: str, agent_name: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.AgentSpec:
        request = pb.ResolveAgentRequest(project_slug=project_slug, agent_name=agent_name)
        response = await unary(self.stub.ResolveAgent, request, metadata=metadata)
        return response.spec

    async def start_agent_run(
        self, agent_id: str, run_id: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Agent:
        request = pb.StartAgentRunRequest(agent_id=agent_id, run_id=run_id)
        return (await unary(self.stub.StartAgentRun, request, metadata=metadata)).agent

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
        request = pb.FinishAgentRunRequest(
            agent_id=agent_id, run_id=run_id, completed=completed, tokens_used=tokens_used, cost=cost
        )
        return (await unary(self.stub.FinishAgentRun, request, metadata=metadata)).agent

    async def register_executor(
        self, executor_id: str, address: str, *, metadata: Metadata | None = None
    ) -> resources_pb2.Executor:
        request = pb.RegisterExecutorRequest(executor=resources_pb2.Executor(id=executor_id, address=address))
        return (await unary(self.stub.RegisterExecutor, request, metadata=metadata)).executor

    async def list_executors(self, *, metadata: Metadata | None = None) -> list[resources_pb2.Executor]:
        response = await unary(self.stub.ListExecutors, pb.ListExecutorsRequest(), metadata=metadata)
        return list(response.executors)
