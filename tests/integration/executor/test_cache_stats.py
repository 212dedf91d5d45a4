"""The agent cache seen from outside, through GetStats: a session's next message reuses its
agent, another session or a changed config builds anew, the LRU cap evicts, and EndSession tears
a session down."""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.support import Stack, final
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"cache_max_entries": 2}


async def test_get_stats_shows_hits_rebuilds_evictions_and_session_ends(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "cached", mock_responses=["hi"])

    before = await stack.stats()
    first = await stack.run(agent, "one", session_id="cache-s1")
    await stack.run(agent, "two", session_id="cache-s1")
    assert await stack.cache_delta(before) == (1, 1, 0), "the second message of a session hits"

    before = await stack.stats()
    await stack.run(agent, "one", session_id="cache-s2")
    assert await stack.cache_delta(before) == (0, 1, 0), "another session builds its own"

    before = await stack.stats()
    config = resources_pb2.AgentConfig(instructions="Answer in French.")
    await stack.update_config(agent, "config.instructions", config, moving="cache-s1")
    changed = await stack.run(agent, "three", session_id="cache-s1")
    assert await stack.cache_delta(before) == (0, 1, 0), "a changed config rebuilds"
    assert final(changed).run_completed.content == final(first).run_completed.content == "hi"

    before = await stack.stats()
    await stack.run(agent, "one", session_id="cache-s3")
    await stack.run(agent, "four", session_id="cache-s1")
    assert await stack.cache_delta(before) == (1, 1, 1), "a third session evicts the least recently used"

    async def runs_done() -> bool:
        return (await stack.stats()).active_runs == 0

    # A run's stream ends with its answer; its bookkeeping goes on a moment longer.
    await eventually(runs_done, what="no run active")
    assert (await stack.stats()).cache_size == 2
    assert await stack.executor.end_session("cache-s1", metadata=stack.metadata) == 1
    assert (await stack.stats()).cache_size == 1
