"""A whole mesh in this process for the reference suites' ports: real gRPC and HTTP servers on
free ports, SQLite or PostgreSQL, the superuser signed in."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentmesh.cli.mesh import Mesh, start_mesh
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD
from tests.postgres import fresh_database

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@contextlib.asynccontextmanager
async def running_mesh(
    request: pytest.FixtureRequest, data_dir: Path, *, executor: dict[str, Any] | None = None
) -> AsyncIterator[Mesh]:
    """The mesh on the backend `request.param` names, stopped on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "sqlite":
            database_url = f"sqlite+aiosqlite:///{data_dir / 'mesh.db'}"
        else:
            server_url = request.getfixturevalue("postgres_url")
            database_url = await stack.enter_async_context(fresh_database(server_url))
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
                "executor": {"cleanup_timeout_seconds": 5.0, **(executor or {})},
            },
        )
        stack.push_async_callback(mesh.stop, 1)
        yield mesh
