"""Runs report their ends to the registry after answering, many per call: every run is still
counted once, and the agent is idle once the last has been reported."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.executor.support import Stack, final

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_concurrent_runs_are_each_counted_once(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "busy", mock_responses=["done"])

    runs = await asyncio.gather(*(stack.run(agent, f"task {n}") for n in range(16)))

    assert [final(events).run_completed.content for events in runs] == ["done"] * 16
    record = await stack.settled(agent)
    assert record.tasks_completed == 16
    assert (await stack.stats()).active_runs == 0
