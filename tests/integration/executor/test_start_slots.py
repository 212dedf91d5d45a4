"""An executor sends at most `max_concurrent_starts` StartAgentRun calls at once (a burst of runs
waits for its turn in the executor rather than in the registry's connection pool, as in the
bench's 5,000 streams): a burst wider than the cap still runs every chat to its answer, each counted once."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.integration.executor.support import Stack, final

pytestmark = pytest.mark.asyncio(loop_scope="module")

BURST = 12


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"max_concurrent_starts": 1}


async def test_a_burst_wider_than_the_cap_runs_every_chat(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "bursty", mock_responses=["done"])
    runs = await asyncio.gather(
        *(stack.run(agent, f"chat {n}", session_id=f"burst-{uuid.uuid4().hex[:8]}") for n in range(BURST))
    )
    assert [final(events).run_completed.content for events in runs] == ["done"] * BURST
    settled = await stack.settled(agent)
    assert settled.tasks_completed == BURST
