"""The registry's client: with `declarations` (checking writes before making them), the only
module of the registry that other services import.

Besides `RegistryClient`, it offers the registry's errors that callers act on by name. The calls on
the registry's public resources live in `client_resources` (a part of the client, imported only
through it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_pb_grpc
from agentmesh.registry.client_resources import ResourceCalls
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
    RunCancelled,
    RunNotFound,
    RunNotHeld,
)
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
    "RunCancelled",
    "RunNotFound",
    "RunNotHeld",
]


class RegistryClient(ResourceCalls):
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
        self, project_slug: str, agent_name: str, *, session_id: str = "", metadata: Metadata | None = None
    ) -> resources_pb2.AgentSpec:
        """The agent resolved for running: at the version the session's runs of it use, when
        `session_id` names a session that has run it, else at its latest."""
        request = internal_pb.ResolveAgentRequest(
            project_slug=project_slug, agent_name=agent_name, session_id=session_id
        )
        response = await unary(self.internal_stub.ResolveAgent, request, metadata=metadata)
        return response.spec

    async def list_public_agents(
        self, *, page_size: int = 0, page_token: str = "", metadata: Metadata | None = None
    ) -> tuple[list[resources_pb2.AgentSpec], str]:
        """One page of the agents their owners published, across projects, and the next page's
        token (empty on the last); the system principal only (gateways' discovery index)."""
        request = internal_pb.ListPublicAgentsRequest(page_size=page_size, page_token=page_token)
        response = await unary(self.internal_stub.ListPublicAgents, request, metadata=metadata)
        return list(response.specs), response.next_page_token

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
        cancelled: bool = False,
        metadata: Metadata | None = None,
    ) -> resources_pb2.Agent:
        request = internal_pb.FinishAgentRunRequest(
            agent_id=agent_id,
            run_id=run_id,
            completed=completed,
            tokens_used=tokens_used,
            cost=cost,
            cancelled=cancelled,
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
        waits_on: Sequence[str] = (),
        metadata: Metadata | None = None,
    ) -> list[run_pb2.InputRequest]:
        """Parks a run `executor_id` holds until a person answers its requests for input (the
        system principal only); the requests as stored — one stored already keeps its state and
        response. Once none is pending, a renewal hands the run out as an orphan carrying them.
        `waits_on`: its delegated runs that suspended themselves; it is handed out once each
        has ended."""
        request = internal_pb.SuspendRunRequest(
            agent_id=agent_id,
            run_id=run_id,
            executor_id=executor_id,
            input_requests=list(requests),
            waits_on_run_ids=list(waits_on),
        )
        return list((await unary(self.internal_stub.SuspendRun, request, metadata=metadata)).input_requests)

    async def register_executor(
        self,
        executor_id: str,
        address: str,
        *,
        tools: Sequence[str] = (),
        model_providers: Sequence[tuple[str, str]] = (),
        run_slots: int = 0,
        metadata: Metadata | None = None,
    ) -> resources_pb2.Executor:
        """Reports an executor in (its heartbeat) with its function tools, its model providers,
        each as (name, what keeps it from answering or ""), and how many runs it takes at once."""
        executor = resources_pb2.Executor(
            id=executor_id,
            address=address,
            tools=tools,
            run_slots=run_slots,
            model_providers=[resources_pb2.ModelProvider(name=n, problem=p) for n, p in model_providers],
        )
        request = internal_pb.RegisterExecutorRequest(executor=executor)
        return (await unary(self.internal_stub.RegisterExecutor, request, metadata=metadata)).executor

    async def list_executors(self, *, metadata: Metadata | None = None) -> list[resources_pb2.Executor]:
        response = await unary(
            self.internal_stub.ListExecutors, internal_pb.ListExecutorsRequest(), metadata=metadata
        )
        return list(response.executors)

    async def claim_schedule_firings(
        self, now: datetime, *, limit: int = 0, metadata: Metadata | None = None
    ) -> list[internal_pb.ClaimedFiring]:
        """The schedules' firings due at `now` that this caller now owns (the system principal
        only): each due time goes to one caller, however many ask at once."""
        request = internal_pb.ClaimScheduleFiringsRequest(limit=limit)
        request.now.FromDatetime(now)
        response = await unary(self.internal_stub.ClaimScheduleFirings, request, metadata=metadata)
        return list(response.firings)

    async def record_schedule_firing(
        self,
        firing_id: str,
        outcome: str,
        *,
        run_id: str = "",
        error: str = "",
        metadata: Metadata | None = None,
    ) -> None:
        """What became of a claimed firing: `running` with its run, then its end."""
        request = internal_pb.RecordScheduleFiringRequest(
            firing_id=firing_id, outcome=outcome, run_id=run_id, error=error
        )
        await unary(self.internal_stub.RecordScheduleFiring, request, metadata=metadata)

    # --- A2A push notification configs (the gateway's A2A face, with the user's token) -------

    async def set_task_push_config(
        self,
        config: internal_pb.TaskPushConfig,
        *,
        session_id: str,
        catch_up_events: Sequence[str] = (),
        catch_up_input_request_id: str = "",
        catch_up_cancelled: bool = False,
        validate_only: bool = False,
        metadata: Metadata | None = None,
    ) -> internal_pb.TaskPushConfig:
        """Stores the config (replacing the task's of the same id) and notifies it, once, of the
        events the task went through already (`catch_up_events`)."""
        request = internal_pb.SetTaskPushConfigRequest(
            config=config,
            session_id=session_id,
            catch_up_events=catch_up_events,
            catch_up_input_request_id=catch_up_input_request_id,
            catch_up_cancelled=catch_up_cancelled,
            validate_only=validate_only,
        )
        response = await unary(self.internal_stub.SetTaskPushConfig, request, metadata=metadata)
        return response.config

    async def get_task_push_config(
        self, project_id: str, run_id: str, config_id: str, *, metadata: Metadata | None = None
    ) -> internal_pb.TaskPushConfig:
        request = internal_pb.GetTaskPushConfigRequest(project_id=project_id, run_id=run_id, id=config_id)
        response = await unary(self.internal_stub.GetTaskPushConfig, request, metadata=metadata)
        return response.config

    async def list_task_push_configs(
        self, project_id: str, run_id: str, *, metadata: Metadata | None = None
    ) -> list[internal_pb.TaskPushConfig]:
        request = internal_pb.ListTaskPushConfigsRequest(project_id=project_id, run_id=run_id)
        response = await unary(self.internal_stub.ListTaskPushConfigs, request, metadata=metadata)
        return list(response.configs)

    async def delete_task_push_config(
        self, project_id: str, run_id: str, config_id: str, *, metadata: Metadata | None = None
    ) -> None:
        request = internal_pb.DeleteTaskPushConfigRequest(project_id=project_id, run_id=run_id, id=config_id)
        await unary(self.internal_stub.DeleteTaskPushConfig, request, metadata=metadata)
