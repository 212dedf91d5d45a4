"""A run whose end the registry has taken is not "lost" by a lease renewal that crosses it.

The registry deletes a run's lease when it takes the run's end, and a renewal that still names the
run comes back `lost`. A run that is its session's turn hands its end over before its caller sees
it end, and its task lives on after the registry took it (it streams its last event, leaves its
agent's runtime). A renewal answered meanwhile used to stop it as taken over: the caller got
UNAVAILABLE "this executor lost the lease of run …" for a run that had answered. Renewals run
back to back here, so that one crosses nearly every run's end.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integration.executor.support import Stack, final

pytestmark = pytest.mark.asyncio(loop_scope="module")

RUNS = 16
ROUNDS = 3


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"lease_renew_interval_seconds": 0.001}


async def test_runs_whose_end_was_taken_are_not_lost_to_a_crossing_renewal(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "answering", mock_responses=["done"])

    for _ in range(ROUNDS):
        runs = await asyncio.gather(*(stack.run(agent, f"task {n}") for n in range(RUNS)))
        assert [final(events).run_completed.content for events in runs] == ["done"] * RUNS

    record = await stack.settled(agent)
    assert record.tasks_completed == RUNS * ROUNDS
