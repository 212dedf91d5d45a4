"""One in-process mesh per test module and database backend (see support.py); a module may
override `executor_settings` to configure its executor."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentmesh.cli.mesh import start_mesh
from tests.integration.executor.support import Stack
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient
from tests.postgres import fresh_database


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {}


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
async def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    executor_settings: dict[str, Any],
) -> AsyncIterator[Stack]:
    data_dir = tmp_path_factory.mktemp("mesh")
    async with contextlib.AsyncExitStack() as exit_stack:
        if request.param == "sqlite":
            database_url = f"sqlite+aiosqlite:///{data_dir / 'mesh.db'}"
        else:
            server_url = request.getfixturevalue("postgres_url")
            database_url = await exit_stack.enter_async_context(fresh_database(server_url))
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
                },
                "gateway": {"executor_health_interval_seconds": 0.2},
                "executor": {"cleanup_timeout_seconds": 5.0, **executor_settings},
            },
        )
        exit_stack.push_async_callback(mesh.stop, 1)
        client = MeshClient(mesh.services["registry"].address, mesh.gateway.address)
        stack = Stack(mesh, client, await client.login())
        exit_stack.push_async_callback(stack.close)
        yield stack
