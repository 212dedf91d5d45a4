"""One mesh per database backend for every gateway test (started once for this package, on its own
event loop), plus cheap extras — a second gateway or executor — for tests that need other settings.

Tests share the mesh, so each one seeds its own users, projects and agents (unique names).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh, load_settings, start_mesh, start_service
from agentmesh.runtime.egress import LOOPBACK
from agentmesh.runtime.service import RunningService
from tests.integration.gateway.support import Api
from tests.mesh import JWT_SECRET, STEADY_LEASE, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient
from tests.postgres import fresh_database

_HERE = Path(__file__).parent
LOOP = "package"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this package runs on the package's event loop, where its mesh lives."""
    marker = pytest.mark.asyncio(loop_scope=LOOP)
    for item in items:
        if _HERE in Path(str(item.fspath)).parents and pytest_asyncio.is_async_test(item):
            item.add_marker(marker, append=False)


@pytest_asyncio.fixture(
    scope=LOOP,
    loop_scope=LOOP,
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
async def backend_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('gateway-mesh') / 'mesh.db'}"
        return
    async with fresh_database(request.getfixturevalue("postgres_url")) as url:
        yield url


@pytest.fixture
def once(backend_url: str) -> None:
    """For tests of what does not depend on the database: they run on SQLite only."""
    if not backend_url.startswith("sqlite"):
        pytest.skip("does not depend on the database: runs once, on SQLite")


# Generous limits: the shared mesh serves many tests at once; limits are tested on extra gateways.
GATEWAY_SETTINGS = {
    "executor_health_interval_seconds": 0.2,
    "executor_refresh_interval_seconds": 0.3,
    "rate_limit_per_second": 10_000,
    "rate_limit_burst": 100_000,
    # The suite registers its users from one address; test_registration_limit.py limits it.
    "registration_max_per_address": 0,
    "http_shutdown_grace_seconds": 1,
    # Schedules fire only where a test moves its gateways' clock on (test_schedules.py).
    "schedule_poll_seconds": 0,
}


@pytest_asyncio.fixture(scope=LOOP, loop_scope=LOOP)
async def mesh(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    started = await start_mesh(
        data_dir=tmp_path_factory.mktemp("gateway-data"),
        grpc_port=0,
        http_port=0,
        database_url=backend_url,
        jwt_secret=JWT_SECRET,
        # The remote agents and MCP servers these tests serve listen on loopback (as with
        # `agentmesh up --allow-loopback-egress`).
        allow_loopback_egress=True,
        extra={
            "registry": {
                "superuser_email": SUPERUSER_EMAIL,
                "superuser_password": SUPERUSER_PASSWORD,
                **STEADY_LEASE,
            },
            "executor": {"heartbeat_interval_seconds": 0.5},
            "gateway": GATEWAY_SETTINGS,
        },
    )
    yield started
    await started.stop(grace_seconds=1)


@pytest_asyncio.fixture(loop_scope=LOOP)
async def http(mesh: Mesh) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=mesh.gateway.http.url, timeout=30) as client:
        yield client


@pytest_asyncio.fixture(loop_scope=LOOP)
async def api(http: httpx.AsyncClient) -> Api:
    return Api(http)


@pytest_asyncio.fixture(loop_scope=LOOP)
async def client(mesh: Mesh) -> AsyncIterator[MeshClient]:
    client = MeshClient(mesh.services["registry"].address, mesh.gateway.address)
    yield client
    await client.close()


async def start_gateway(mesh: Mesh, **settings: object) -> RunningService:
    """Another gateway in front of the mesh's services, with its own settings."""
    base = {
        "host": "127.0.0.1",
        "port": 0,
        "http_host": "127.0.0.1",
        "http_port": 0,
        "jwt_secret": JWT_SECRET,
        "registry_address": mesh.services["registry"].address,
        "memory_address": mesh.services["memory"].address,
        "executor_addresses": [mesh.services["executor"].address],
        **GATEWAY_SETTINGS,
    }
    return await start_service("gateway", load_settings("gateway", **{**base, **settings}))


async def start_executor(mesh: Mesh, **settings: object) -> RunningService:
    """Another executor on the mesh's registry and memory, registered in the pool."""
    base = {
        "host": "127.0.0.1",
        "port": 0,
        "jwt_secret": JWT_SECRET,
        "registry_address": mesh.services["registry"].address,
        "memory_address": mesh.services["memory"].address,
        "heartbeat_interval_seconds": 0.5,
        "egress_allow": list(LOOPBACK),
    }
    return await start_service("executor", load_settings("executor", **{**base, **settings}))
