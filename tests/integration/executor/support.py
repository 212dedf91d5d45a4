"""What the executor's integration tests share: a whole mesh in this process (one per test module
and database backend — starting it is most of a test's cost, and each test works in projects of
its own), and helpers to declare agents, chat, and read what memory and the registry recorded."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import field_mask_pb2, struct_pb2

from agentmesh.cli.mesh import Mesh, load_settings, start_service
from agentmesh.common.v1 import run_pb2, types_pb2
from agentmesh.executor.client import ExecutorClient
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.bearer import service_channel
from tests.mesh import JWT_SECRET, MeshClient, bearer

LLM = resources_pb2.AGENT_KIND_LLM
SEQUENTIAL = resources_pb2.AGENT_KIND_SEQUENTIAL
PARALLEL = resources_pb2.AGENT_KIND_PARALLEL
LOOP = resources_pb2.AGENT_KIND_LOOP
Event = memory_pb2.Event
EventType = memory_pb2.EventType


def event_type(event: Event) -> str:
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()


def kind(event: run_pb2.RunEvent) -> str:
    return event.WhichOneof("kind") or ""


@dataclass(frozen=True)
class Project:
    id: str
    slug: str


@dataclass(frozen=True)
class Agent:
    project: Project
    name: str
    id: str

    @property
    def ref(self) -> str:
        return f"{self.project.slug}/{self.name}"


class Stack:
    """A running mesh, signed in as the superuser, with stubs for every service."""

    def __init__(self, mesh: Mesh, client: MeshClient, token: str, *, database_url: str = "") -> None:
        self.mesh = mesh
        self.database_url = database_url  # every service's (one database on one host)
        self.client = client
        self.token = token
        self.metadata = bearer(token)
        self._memory_channel = service_channel(mesh.services["memory"].address)
        self.memory = memory_service_pb2_grpc.MemoryServiceStub(self._memory_channel)
        self._executor_channel = service_channel(mesh.services["executor"].address)
        self.executor = ExecutorClient(self._executor_channel)

    async def close(self) -> None:
        await self._memory_channel.close()
        await self._executor_channel.close()
        await self.client.close()

    # -- declaring --------------------------------------------------------------------------------

    async def project(self) -> Project:
        suffix = uuid.uuid4().hex[:8]
        created = await self.client.registry.CreateProject(
            reg.CreateProjectRequest(project=resources_pb2.Project(name=f"p {suffix}", slug=f"p-{suffix}")),
            metadata=self.metadata,
        )
        return Project(created.project.id, created.project.slug)

    async def agent(
        self,
        project: Project,
        name: str,
        *,
        mock_responses: Sequence[Any] | None = None,
        kind: int = LLM,
        model: str = "mock",
        fallback_models: Sequence[str] = (),
        model_params: dict[str, Any] | None = None,
        tools: Sequence[str] = (),
        mcp_servers: Sequence[resources_pb2.McpServer] = (),
        network_access: Sequence[str] = (),
        sub_agents: Sequence[str] = (),
        max_steps: int = 5,
        max_iterations: int = 0,
        tool_permissions: dict[str, str] | None = None,
        agent_tool_permissions: dict[str, str] | None = None,
        input_expiry_seconds: int = 0,
        delegation_limits: resources_pb2.DelegationLimits | None = None,
        context_budget_tokens: int = 0,
        compaction_model: str = "",
        compaction_prompt: str = "",
        run_budget: run_pb2.Budget | None = None,
    ) -> Agent:
        """An agent of a type of its own (so every setting is this test's); permissions as REST
        writes them ("allow", "ask", "deny"), the type's and the agent's own."""
        suffix = uuid.uuid4().hex[:8]
        agent_type = resources_pb2.AgentType(
            name=f"type {suffix}",
            slug=f"type-{suffix}",
            description=f"{name} for a test",
            personality_prompt=f"You are {name}.",
            primary_model=model,
            fallback_models=list(fallback_models),
            tools=list(tools),
            mcp_servers=list(mcp_servers),
            kind=kind,
            sub_agents=list(sub_agents),
            max_steps=max_steps,
            max_iterations=max_iterations,
            is_active=True,
            tool_permissions=permission_map(tool_permissions),
            input_expiry_seconds=input_expiry_seconds,
            delegation_limits=delegation_limits,
            context_budget_tokens=context_budget_tokens,
            compaction_model=compaction_model,
            compaction_prompt=compaction_prompt,
            run_budget=run_budget,
        )
        if model_params:
            agent_type.model_params.update(model_params)
        created_type = await self.client.registry.CreateAgentType(
            reg.CreateAgentTypeRequest(agent_type=agent_type), metadata=self.metadata
        )
        config = resources_pb2.AgentConfig()
        if mock_responses:
            config.mock_responses.CopyFrom(list_value(mock_responses))
        if network_access:
            config.network_access.CopyFrom(types_pb2.StringList(values=list(network_access)))
        config.tool_permissions.update(permission_map(agent_tool_permissions))
        created = await self.client.registry.CreateAgent(
            reg.CreateAgentRequest(
                agent=resources_pb2.Agent(
                    project_id=project.id, agent_type_id=created_type.agent_type.id, name=name, config=config
                )
            ),
            metadata=self.metadata,
        )
        return Agent(project, name, created.agent.id)

    async def update_config(
        self, agent: Agent, path: str, config: resources_pb2.AgentConfig, *, moving: str = ""
    ) -> None:
        """Changes the agent's config: a new version, which the session `moving` (a session that
        has run the agent, and keeps its version until moved) moves to."""
        await self.client.registry.UpdateAgent(
            reg.UpdateAgentRequest(
                agent=resources_pb2.Agent(project_id=agent.project.id, id=agent.id, config=config),
                update_mask=field_mask_pb2.FieldMask(paths=[path]),
            ),
            metadata=self.metadata,
        )
        if moving:
            await self.client.registry.MoveSession(
                reg.MoveSessionRequest(
                    project_id=agent.project.id, session_id=moving, agent_id=agent.id, latest=True
                ),
                metadata=self.metadata,
            )

    async def pause(self, agent: Agent) -> None:
        await self.client.registry.PauseAgent(
            reg.PauseAgentRequest(project_id=agent.project.id, id=agent.id), metadata=self.metadata
        )

    async def terminate(self, agent: Agent) -> None:
        await self.client.registry.DeleteAgent(
            reg.DeleteAgentRequest(project_id=agent.project.id, id=agent.id), metadata=self.metadata
        )

    async def get(self, agent: Agent) -> resources_pb2.Agent:
        response = await self.client.registry.GetAgent(
            reg.GetAgentRequest(project_id=agent.project.id, id=agent.id), metadata=self.metadata
        )
        return response.agent

    async def status(self, agent: Agent) -> str:
        return _status_name(await self.get(agent))

    async def settled(self, agent: Agent) -> resources_pb2.Agent:
        """The agent once it is not working any more: a run's stream ends with its answer, and
        the run finishes its bookkeeping (status, usage) right after."""
        record = await self.get(agent)
        while record.status == resources_pb2.AGENT_STATUS_WORKING:
            await asyncio.sleep(0.02)
            record = await self.get(agent)
        return record

    async def settled_status(self, agent: Agent) -> str:
        return _status_name(await self.settled(agent))

    # -- talking ----------------------------------------------------------------------------------

    async def chat(self, agent: Agent, message: str, *, session_id: str = "") -> list[run_pb2.RunEvent]:
        """StreamChat through the gateway; every event of the stream."""
        call = self.client.gateway.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=agent.ref, message=message, session_id=session_id),
            metadata=self.metadata,
        )
        return [response.event async for response in call]

    def run_request(
        self, agent: Agent, message: str, session_id: str | None = None
    ) -> executor_service_pb2.RunRequest:
        return executor_service_pb2.RunRequest(
            project_slug=agent.project.slug,
            agent_name=agent.name,
            session_id=session_id or uuid.uuid4().hex,
            input=message,
        )

    async def run(
        self, agent: Agent, message: str, *, session_id: str | None = None, timeout: float | None = None
    ) -> list[run_pb2.RunEvent]:
        """Run on the executor directly; every event of the stream."""
        request = self.run_request(agent, message, session_id)
        return [e async for e in self.executor.run(request, timeout=timeout, metadata=self.metadata)]

    async def stats(self) -> executor_service_pb2.GetStatsResponse:
        return await self.executor.get_stats(metadata=self.metadata)

    async def cache_delta(self, before: executor_service_pb2.GetStatsResponse) -> tuple[int, int, int]:
        """The agent cache's (hits, misses, evictions) since `before`."""
        after = await self.stats()
        return (
            after.cache_hits - before.cache_hits,
            after.cache_misses - before.cache_misses,
            after.cache_evictions - before.cache_evictions,
        )

    # -- reading ----------------------------------------------------------------------------------

    async def events(self, session_id: str, agent: str = "") -> list[Event]:
        """Every event of the session (of one agent when named), in seq order."""
        events: list[Event] = []
        request = memory_service_pb2.ListEventsRequest(session_id=session_id, agent=agent, page_size=1000)
        while True:
            response = await self.memory.ListEvents(request, metadata=self.metadata)
            events.extend(response.events)
            if not response.next_page_token:
                return events
            request.page_token = response.next_page_token


async def extra_executor(stack: Stack, name: str, **addresses_and_settings: Any) -> Any:
    """One more executor of the stack's mesh, started on its own: its `registry_address` and
    `memory_address` the mesh's unless given (a proxy's, say), with these settings."""
    return await start_service(
        "executor",
        load_settings(
            "executor",
            **{
                "host": "127.0.0.1",
                "port": 0,
                "jwt_secret": JWT_SECRET,
                "executor_id": f"{name}-{uuid.uuid4().hex[:8]}",
                "registry_address": stack.mesh.services["registry"].address,
                "memory_address": stack.mesh.services["memory"].address,
                **addresses_and_settings,
            },
        ),
    )


def permission_map(rules: dict[str, str] | None) -> dict[str, int]:
    """Rules as REST writes them, as the protos do."""
    return {
        pattern: types_pb2.ToolPermission.Value(f"TOOL_PERMISSION_{value.upper()}")
        for pattern, value in (rules or {}).items()
    }


def list_value(items: Sequence[Any]) -> struct_pb2.ListValue:
    value = struct_pb2.ListValue()
    value.extend(list(items))
    return value


def final(events: Sequence[run_pb2.RunEvent]) -> run_pb2.RunEvent:
    """The addressed agent's last event."""
    own = [e for e in events if not e.delegation_path]
    return own[-1]


def calls(name: str, **arguments: Any) -> dict[str, Any]:
    """A mock response that calls one tool."""
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


def delegate(agent: str, task: str) -> dict[str, Any]:
    """A mock response that delegates with the native `delegate` tool."""
    return calls("delegate", agent=agent, task=task)


def _status_name(agent: resources_pb2.Agent) -> str:
    return resources_pb2.AgentStatus.Name(agent.status).removeprefix("AGENT_STATUS_").lower()
