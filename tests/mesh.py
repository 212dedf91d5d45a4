"""Helpers for tests that drive a whole mesh: start it, sign in, declare agents, chat."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2

from agentmesh.cli.mesh import Mesh, start_mesh
from agentmesh.common.v1 import types_pb2
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.egress import LOOPBACK
from tests.postgres import fresh_database

JWT_SECRET = "test-secret-" + "x" * 40
SUPERUSER_EMAIL = "admin@example.com"
SUPERUSER_PASSWORD = "admin-password-1"
# A run's lease for in-process meshes. They share one event loop with their tests, on a machine
# that runs the suite's workers side by side: starved long enough, an executor misses the
# default 10 s and the registry hands its run to a taker in the middle of a test about something
# else. Tests of takeover set short leases of their own.
STEADY_LEASE = {"run_lease_seconds": 60.0}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Seeded:
    """An agent created for a test: its project slug and name, and the owner's token."""

    project_id: str
    project_slug: str
    agent_name: str
    agent_id: str
    token: str

    @property
    def ref(self) -> str:
        return f"{self.project_slug}/{self.agent_name}"


class MeshClient:
    """Registry and gateway stubs over real channels, for driving a mesh in tests."""

    def __init__(
        self, registry_address: str, gateway_address: str, *, tls: grpc.ChannelCredentials | None = None
    ) -> None:
        """Plaintext channels, or TLS ones with `tls` (a mesh serving TLS)."""
        self._registry_channel = _channel(registry_address, tls)
        self._gateway_channel = _channel(gateway_address, tls)
        self.registry = reg_grpc.RegistryServiceStub(self._registry_channel)
        self.gateway = gateway_service_pb2_grpc.GatewayServiceStub(self._gateway_channel)

    async def close(self) -> None:
        await self._registry_channel.close()
        await self._gateway_channel.close()

    async def login(self, email: str = SUPERUSER_EMAIL, password: str = SUPERUSER_PASSWORD) -> str:
        response = await self.registry.Login(reg.LoginRequest(email=email, password=password))
        return response.tokens.access_token

    async def seed_agent(
        self,
        token: str,
        *,
        name: str = "assistant",
        mock_responses: Sequence[Any] = (),
        kind: int = resources_pb2.AGENT_KIND_LLM,
        network_access: Sequence[str] = (),
        sub_agents: Sequence[str] = (),
        project: Seeded | None = None,
        model: str = "mock",
        mcp_servers: Sequence[resources_pb2.McpServer] = (),
        max_iterations: int | None = None,
        tools: Sequence[str] = (),
        type_token: str | None = None,
    ) -> Seeded:
        """Creates (or reuses) a project and spawns one agent of a fresh type into it; the type is
        declared with `type_token` when given (a superuser's, for an agent of an ordinary user)."""
        suffix = uuid.uuid4().hex[:8]
        agent_type = (
            await self.registry.CreateAgentType(
                reg.CreateAgentTypeRequest(
                    agent_type=resources_pb2.AgentType(
                        name=f"type {suffix}",
                        slug=f"type-{suffix}",
                        description="a test agent",
                        personality_prompt="You are a test agent.",
                        primary_model=model,
                        kind=kind,
                        max_steps=5,
                        is_active=True,
                        mcp_servers=mcp_servers,
                        tools=list(tools),
                    )
                ),
                metadata=bearer(type_token or token),
            )
        ).agent_type
        if project is None:
            created = (
                await self.registry.CreateProject(
                    reg.CreateProjectRequest(
                        project=resources_pb2.Project(name=f"p {suffix}", slug=f"p-{suffix}")
                    ),
                    metadata=bearer(token),
                )
            ).project
            project_id, project_slug = created.id, created.slug
        else:
            project_id, project_slug = project.project_id, project.project_slug
        config = resources_pb2.AgentConfig()
        if mock_responses:
            config.mock_responses.CopyFrom(_list_value(mock_responses))
        if network_access:
            config.network_access.CopyFrom(types_pb2.StringList(values=network_access))
        if sub_agents:
            config.sub_agents.CopyFrom(types_pb2.StringList(values=sub_agents))
        if max_iterations is not None:
            config.max_iterations = max_iterations
        agent = (
            await self.registry.CreateAgent(
                reg.CreateAgentRequest(
                    agent=resources_pb2.Agent(
                        project_id=project_id, agent_type_id=agent_type.id, name=name, config=config
                    )
                ),
                metadata=bearer(token),
            )
        ).agent
        return Seeded(project_id, project_slug, agent.name, agent.id, token)

    async def stream_chat(
        self, seeded: Seeded, message: str, *, session_id: str = ""
    ) -> list[gateway_service_pb2.StreamChatResponse]:
        call = self.gateway.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=seeded.ref, message=message, session_id=session_id),
            metadata=bearer(seeded.token),
        )
        return [response async for response in call]


def _channel(address: str, tls: grpc.ChannelCredentials | None) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address) if tls is None else grpc.aio.secure_channel(address, tls)


def _list_value(items: Sequence[Any]) -> struct_pb2.ListValue:
    value = struct_pb2.ListValue()
    value.extend(list(items))
    return value


# A whole mesh in this process, on the backend a fixture's param names.
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@contextlib.asynccontextmanager
async def mesh_database(request: pytest.FixtureRequest, data_dir: Path) -> AsyncIterator[str]:
    """A database for a mesh on the backend `request.param` names: a SQLite file in `data_dir`,
    or a fresh PostgreSQL database (dropped on the way out)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{data_dir / 'mesh.db'}"
    else:
        async with fresh_database(request.getfixturevalue("postgres_url")) as url:
            yield url


@contextlib.asynccontextmanager
async def running_mesh(
    request: pytest.FixtureRequest,
    data_dir: Path,
    *,
    executor: dict[str, Any] | None = None,
    registry: dict[str, Any] | None = None,
    database_url: str | None = None,
) -> AsyncIterator[Mesh]:
    """The mesh on the backend `request.param` names (on `database_url` when given, a database
    of `mesh_database`), stopped on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        if database_url is None:
            database_url = await stack.enter_async_context(mesh_database(request, data_dir))
        mesh = await start_mesh(
            data_dir=data_dir,
            grpc_port=0,
            http_port=0,
            database_url=database_url,
            jwt_secret=JWT_SECRET,
            extra={
                "registry": {
                    "superuser_email": SUPERUSER_EMAIL,
                    "superuser_password": SUPERUSER_PASSWORD,
                    "password_hash_time_cost": 1,
                    "password_hash_memory_kib": 64,
                    **STEADY_LEASE,
                    # The suite's remote agents and MCP servers listen on loopback, which the
                    # egress policy refuses unless allowed (registry and executors alike) — as an
                    # operator allows it.
                    "egress_allow": list(LOOPBACK),
                    **(registry or {}),
                },
                # The suite registers its users from one address, more than the default allows.
                "gateway": {"executor_health_interval_seconds": 0.2, "registration_max_per_address": 0},
                "executor": {
                    "cleanup_timeout_seconds": 5.0,
                    "egress_allow": list(LOOPBACK),
                    **(executor or {}),
                },
            },
        )
        stack.push_async_callback(mesh.stop, 1)
        yield mesh
