"""A registry on a loopback port, on each database backend, driven through the real generated
stub and the RegistryClient."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_pb_grpc
from agentmesh.registry.app import MIGRATIONS, VERSION_TABLE, start
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.settings import RegistrySettings
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.store.in_memory import InMemoryRegistryStore
from agentmesh.registry.store.sql import SqlRegistryStore
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.runtime.database import create_engine, upgrade
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import service_channel
from tests.integration.registry.support import JWT_SECRET, Api, Worker, bearer, make_settings


@pytest.fixture
def registry_settings(database_url: str) -> RegistrySettings:
    return make_settings(database_url)


@pytest.fixture
async def registry_service(registry_settings: RegistrySettings) -> AsyncIterator[RunningService]:
    service = await start(registry_settings)
    yield service
    await service.stop(0)


@pytest.fixture
async def channel(registry_service: RunningService) -> AsyncIterator[grpc.aio.Channel]:
    # As the mesh's services call: with a service credential (which the public service ignores).
    async with service_channel(registry_service.address, JWT_SECRET) as channel:
        yield channel


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> pb_grpc.RegistryServiceStub:
    return pb_grpc.RegistryServiceStub(channel)


@pytest.fixture
def internal_stub(channel: grpc.aio.Channel) -> internal_pb_grpc.RegistryInternalServiceStub:
    return internal_pb_grpc.RegistryInternalServiceStub(channel)


@pytest.fixture
def client(channel: grpc.aio.Channel) -> RegistryClient:
    return RegistryClient(channel)


@pytest.fixture
def codec() -> TokenCodec:
    return TokenCodec(JWT_SECRET)


@pytest.fixture
def api(stub: pb_grpc.RegistryServiceStub) -> Api:
    return Api(stub)


@pytest.fixture
async def worker(api: Api, codec: TokenCodec) -> Worker:
    """An owner's agent named "worker" in a project of its own, and the system principal's metadata."""
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    return Worker(owner, project, agent, bearer(codec.system_token()))


@pytest.fixture
async def registry_store(store_database_url: str | None) -> AsyncIterator[RegistryStore]:
    """Every RegistryStore implementation in turn: in memory, then SQL on SQLite and PostgreSQL
    (migrated, as the service runs it)."""
    if store_database_url is None:
        yield InMemoryRegistryStore()
        return
    engine = create_engine(store_database_url)
    try:
        store = SqlRegistryStore(engine)  # before any connection: it sets up SQLite transactions
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        yield store
    finally:
        await engine.dispose()
