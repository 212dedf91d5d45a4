"""`agentmesh demo` against a running mesh: it declares the example's coordinator and worker, runs
a chat that delegates, and shows the steps as they stream — twice, the second time changing
nothing in the registry."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agentmesh.cli.client import Credentials
from agentmesh.cli.demo import EXAMPLE, run_demo
from tests.integration.executor.support import Stack, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_demo_delegates_and_shows_every_step(stack: Stack) -> None:
    assert EXAMPLE.is_file()
    outputs = []
    for _ in range(2):
        output = io.StringIO()
        console = Console(file=output, width=140, force_terminal=False, color_system=None)
        result = await run_demo(
            stack.mesh.gateway.address,
            Credentials(token=stack.token),
            console=console,
        )
        outputs.append(output.getvalue())
        assert result.completed
        assert result.answer.startswith("Done: the worker processed task 42")
        kinds = {(e.agent, kind(e)) for e in result.events}
        assert {
            ("coordinator", "delegation_request"),
            ("worker", "tool_call"),
            ("worker", "tool_result"),
            ("coordinator", "delegation_response"),
        } <= kinds

    first, second = outputs
    assert "created" in first and "0 created" in second and "unchanged" in second
    for text in outputs:
        assert "coordinator delegates to worker: Process task 42" in text
        assert "worker calls get_current_time{'timezone': 'UTC'}" in text
        assert "← worker completed: Task 42 is processed" in text
        assert "demo/coordinator: Done: the worker processed task 42" in text
