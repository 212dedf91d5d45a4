"""Helpers for registry tests: settings, error unpacking, and short ways to set up state through
the public RPCs."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import struct_pb2

from agentmesh.common.v1 import types_pb2
from agentmesh.registry.settings import RegistrySettings
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.errors import DomainError, from_rpc_error

JWT_SECRET = "registry-test-secret-" + "s" * 32
SUPERUSER_EMAIL = "root@example.com"
SUPERUSER_PASSWORD = "root-password-1"
PASSWORD = "correct horse battery"
LOGIN_MAX_FAILURES = 3

Metadata = Sequence[tuple[str, str]]


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


async def rpc_error(call: Awaitable[Any]) -> DomainError:
    """Awaits a call that must fail; returns the failure as the typed error the server raised."""
    try:
        await call
    except grpc.aio.AioRpcError as error:  # a stub call
        return from_rpc_error(error)
    except DomainError as error:  # a RegistryClient call
        return error
    raise AssertionError("the call succeeded")


def violation_fields(error: DomainError) -> set[str]:
    return {violation.field for violation in error.violations}


def make_settings(database_url: str, **overrides: Any) -> RegistrySettings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "jwt_secret": JWT_SECRET,
        "host": "127.0.0.1",
        "port": 0,
        "superuser_email": SUPERUSER_EMAIL,
        "superuser_password": SUPERUSER_PASSWORD,
        # Cheap hashes keep the suite fast; production defaults are OWASP's (tested in unit tests).
        "password_hash_time_cost": 1,
        "password_hash_memory_kib": 64,
        "login_max_failures": LOGIN_MAX_FAILURES,
        "login_lockout_seconds": 30,
        "executor_heartbeat_ttl_seconds": 30,
    }
    values.update(overrides)
    return RegistrySettings(**values)


@dataclass
class Caller:
    """A signed-in user: who it is and the metadata to call as it."""

    user: res.User
    access_token: str
    refresh_token: str

    @property
    def metadata(self) -> Metadata:
        return bearer(self.access_token)


@dataclass(frozen=True)
class Worker:
    """An agent whose runs a test starts, leases and finishes as an executor does."""

    owner: Caller
    project: res.Project
    agent: res.Agent
    system: Metadata  # the system principal's metadata: executors call as it


class Api:
    """Short ways to set up the state a test needs, through the public RPCs."""

    def __init__(self, stub: pb_grpc.RegistryServiceStub) -> None:
        self.stub = stub
        self._root: Caller | None = None

    async def sign_up(self, email: str | None = None, password: str = PASSWORD) -> Caller:
        email = email or f"user-{uuid.uuid4().hex[:10]}@example.com"
        user = (await self.stub.RegisterUser(pb.RegisterUserRequest(email=email, password=password))).user
        tokens = (await self.stub.Login(pb.LoginRequest(email=email, password=password))).tokens
        return Caller(user, tokens.access_token, tokens.refresh_token)

    async def root(self) -> Caller:
        if self._root is None:
            tokens = (
                await self.stub.Login(pb.LoginRequest(email=SUPERUSER_EMAIL, password=SUPERUSER_PASSWORD))
            ).tokens
            me = await self.stub.GetCurrentUser(
                pb.GetCurrentUserRequest(), metadata=bearer(tokens.access_token)
            )
            self._root = Caller(me.user, tokens.access_token, tokens.refresh_token)
        return self._root

    async def agent_type(self, **fields: Any) -> res.AgentType:
        suffix = uuid.uuid4().hex[:8]
        values: dict[str, Any] = {
            "name": f"Type {suffix}",
            "slug": f"type-{suffix}",
            "description": "a test type",
            "personality_prompt": "You are helpful.",
            "primary_model": "mock",
            "is_active": True,
        }
        values.update(fields)
        request = pb.CreateAgentTypeRequest(agent_type=res.AgentType(**values))
        root = await self.root()
        return (await self.stub.CreateAgentType(request, metadata=root.metadata)).agent_type

    async def project(self, owner: Caller, **fields: Any) -> res.Project:
        suffix = uuid.uuid4().hex[:8]
        values: dict[str, Any] = {"name": f"Project {suffix}", "slug": f"project-{suffix}"}
        values.update(fields)
        request = pb.CreateProjectRequest(project=res.Project(**values))
        return (await self.stub.CreateProject(request, metadata=owner.metadata)).project

    async def agent(
        self,
        owner: Caller,
        project: res.Project,
        name: str,
        *,
        agent_type: res.AgentType | None = None,
        config: res.AgentConfig | None = None,
    ) -> res.Agent:
        agent_type = agent_type or await self.agent_type()
        request = pb.CreateAgentRequest(
            agent=res.Agent(project_id=project.id, agent_type_id=agent_type.id, name=name, config=config)
        )
        return (await self.stub.CreateAgent(request, metadata=owner.metadata)).agent


def strings(*values: str) -> types_pb2.StringList:
    return types_pb2.StringList(values=list(values))


IDLE, WORKING, PAUSED, TERMINATED = (
    res.AGENT_STATUS_IDLE,
    res.AGENT_STATUS_WORKING,
    res.AGENT_STATUS_PAUSED,
    res.AGENT_STATUS_TERMINATED,
)


def list_value(*items: object) -> struct_pb2.ListValue:
    value = struct_pb2.ListValue()
    value.extend(list(items))
    return value
