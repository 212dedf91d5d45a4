"""One in-process mesh per test module and database backend (see support.py); a module may
override `executor_settings` (or `registry_settings`) to configure its executor (registry)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.integration.executor.mcp_http import serve_everything_http, serve_http
from tests.integration.executor.openai_server import FakeOpenAI
from tests.integration.executor.support import Stack
from tests.mesh import BACKENDS, MeshClient, mesh_database, running_mesh


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def openai_server() -> AsyncIterator[FakeOpenAI]:
    """An OpenAI-compatible test server of the module's own, for a module whose agents use the
    `openai` provider (its `executor_settings` point the executor at it)."""
    async with FakeOpenAI() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything_url() -> AsyncIterator[str]:
    """The reference MCP server (server-everything, a server nobody here wrote) over streamable
    HTTP: one process for the module."""
    async with serve_everything_http() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def python_sdk_url() -> AsyncIterator[str]:
    """The Python SDK's test server (mcp_server.py) over streamable HTTP, for the module."""
    async with serve_http() as url:
        yield url


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {}


@pytest.fixture(scope="module")
def registry_settings() -> dict[str, Any]:
    return {}


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    executor_settings: dict[str, Any],
    registry_settings: dict[str, Any],
) -> AsyncIterator[Stack]:
    data_dir = tmp_path_factory.mktemp("mesh")
    async with (
        mesh_database(request, data_dir) as database_url,
        running_mesh(
            request,
            data_dir,
            executor=executor_settings,
            registry=registry_settings,
            database_url=database_url,
        ) as mesh,
    ):
        client = MeshClient(mesh.services["registry"].address, mesh.gateway.address)
        stack = Stack(mesh, client, await client.login(), database_url=database_url)
        try:
            yield stack
        finally:
            await stack.close()
