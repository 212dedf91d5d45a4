"""Fixtures of the agent-platform reference suite, adapted to agentmesh: `e2e_client` is an HTTP
client of a real gateway (its REST API over real HTTP) in front of a whole running mesh, and
`e2e_superuser` the bootstrapped superuser with its sign-in tokens. The mesh is started once per
database backend — SQLite, then PostgreSQL — for the whole package, on the package's event loop;
every test of the suite runs against each.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh, start_mesh
from tests.mesh import JWT_SECRET, STEADY_LEASE, SUPERUSER_EMAIL, SUPERUSER_PASSWORD
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
async def e2e_mesh(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Mesh]:
    """All four services on loopback, the gateway serving HTTP on a free port."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('agent-platform') / 'mesh.db'}"
        async with _mesh(url, tmp_path_factory) as mesh:
            yield mesh
        return
    async with (
        fresh_database(request.getfixturevalue("postgres_url")) as url,
        _mesh(url, tmp_path_factory) as mesh,
    ):
        yield mesh


@contextlib.asynccontextmanager
async def _mesh(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    """A mesh with the bootstrapped superuser, stopped on the way out; default settings otherwise
    (but a lease no load delays past: tests/mesh.py, and no limit on sign-ups)."""
    mesh = await start_mesh(
        data_dir=tmp_path_factory.mktemp("agent-platform-data"),
        grpc_port=0,
        http_port=0,
        database_url=database_url,
        jwt_secret=JWT_SECRET,
        extra={
            "registry": {
                "superuser_email": SUPERUSER_EMAIL,
                "superuser_password": SUPERUSER_PASSWORD,
                **STEADY_LEASE,
            },
            # The suites register their users from one address, more than the default allows.
            "gateway": {"registration_max_per_address": 0},
        },
    )
    try:
        yield mesh
    finally:
        await mesh.stop(grace_seconds=1)


@pytest_asyncio.fixture(loop_scope=LOOP)
async def e2e_client(e2e_mesh: Mesh) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=e2e_mesh.gateway.http.url, timeout=30) as client:
        yield client


@pytest_asyncio.fixture(loop_scope=LOOP)
async def e2e_superuser(e2e_client: httpx.AsyncClient) -> dict[str, Any]:
    """The superuser agentmesh bootstraps at start, signed in through the REST API."""
    login = await e2e_client.post(
        "/api/v1/auth/login", json={"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD}
    )
    assert login.status_code == 200, login.text
    return {"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD, "tokens": login.json()}
