"""Fixtures for the port of Google ADK's loop-agent tests: a whole agentmesh mesh in this process
(one per module and database backend) in place of ADK's in-memory session service and runner,
driven over gRPC (`Stack`, shared with the executor's integration tests).

How agents are declared is the adaptation: ADK's custom agents (which yield "hello <id>") are
LLM agents scripted to say it, its fake LLM with an escalating function tool is an LLM agent
scripted to call `exit_loop` (with `summarize` when the tool does not skip summarization), and
ADK's snake_case names are declared as DNS labels (`custom_agent_0` → `custom-agent-0`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.integration.executor.support import Stack
from tests.mesh import BACKENDS, MeshClient, running_mesh

# A loop without a bound stops here; the unbounded test leaves long before.
SAFETY_CAP = 50


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with running_mesh(
        request, tmp_path_factory.mktemp("adk"), executor={"loop_safety_max_iterations": SAFETY_CAP}
    ) as mesh:
        client = MeshClient(mesh.services["registry"].address, mesh.gateway.address)
        stack = Stack(mesh, client, await client.login())
        try:
            yield stack
        finally:
            await stack.close()
