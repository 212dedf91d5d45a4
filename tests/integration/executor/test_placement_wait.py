"""A delegated run that every executor refuses for now waits for one (RunRouter.run's
`placement_seconds`, the executor's `placement_wait_seconds`): the pool is tried again after a
growing pause, so a slot freed meanwhile — or an executor back from a restart — takes it, instead
of the delegation failing at once. What waits too long still fails, naming why. The executor here
takes two runs at a time: a slow run holds one slot, the coordinator the other, and its worker
has to wait for the slow run to end."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.integration.executor.support import Agent, Stack, delegate, event_type, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

PLACEMENT_WAIT_SECONDS = 6.0


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"max_concurrent_runs": 2, "placement_wait_seconds": PLACEMENT_WAIT_SECONDS}


@pytest.fixture(scope="module")
def registry_settings() -> dict[str, Any]:
    # One project fills the pool on purpose: no fair share holds it to half (docs/tenants.md).
    return {"project_share_of_pool": 1.0}


async def _agents(stack: Stack, *, slow_seconds: float, answer: str) -> tuple[Agent, Agent]:
    """A slow agent (one chunk after `slow_seconds`), and a coordinator that delegates to a quick
    worker and then answers `answer`."""
    project = await stack.project()
    slow = await stack.agent(
        project, "slow", mock_responses=[{"content": "slow done", "delay_seconds": slow_seconds}]
    )
    await stack.agent(project, "worker", mock_responses=["worker done"])
    coordinator = await stack.agent(
        project, "coordinator", network_access=["worker"], mock_responses=[delegate("worker", "work"), answer]
    )
    return slow, coordinator


async def _holding_a_slot(stack: Stack, agent: Agent) -> asyncio.Task[list[Any]]:
    """`agent`'s run in the background, once it holds its slot (its run started)."""
    started = asyncio.Event()

    async def run() -> list[Any]:
        events = []
        async for event in stack.executor.run(stack.run_request(agent, "hold"), metadata=stack.metadata):
            events.append(event)
            started.set()
        return events

    task = asyncio.create_task(run())
    await asyncio.wait_for(started.wait(), 30)
    return task


async def _delegation_outcome(stack: Stack, session_id: str) -> dict[str, Any]:
    (response,) = [e for e in await stack.events(session_id) if event_type(e) == "delegation_response"]
    return json.loads(response.content)


async def test_a_delegated_run_waits_for_a_slot_freed_meanwhile(stack: Stack) -> None:
    # The slow run's one chunk comes after 2 s: the coordinator delegates long before it ends.
    slow, coordinator = await _agents(stack, slow_seconds=2.0, answer="all done")
    holder = await _holding_a_slot(stack, slow)

    request = stack.run_request(coordinator, "go")
    events = [e async for e in stack.executor.run(request, metadata=stack.metadata)]

    assert kind(events[-1]) == "run_completed" and events[-1].run_completed.content == "all done"
    assert (await _delegation_outcome(stack, request.session_id))["outcome"] == "completed"
    worker_answers = [
        e.run_completed.content for e in events if e.agent == "worker" and kind(e) == "run_completed"
    ]
    assert worker_answers == ["worker done"]
    assert kind((await holder)[-1]) == "run_completed"  # it ended first: the worker took its slot


async def test_a_delegated_run_no_executor_takes_in_time_fails_saying_why(stack: Stack) -> None:
    slow, coordinator = await _agents(stack, slow_seconds=PLACEMENT_WAIT_SECONDS * 3, answer="went on")
    holder = await _holding_a_slot(stack, slow)
    try:
        request = stack.run_request(coordinator, "go")
        events = [e async for e in stack.executor.run(request, metadata=stack.metadata)]
    finally:
        holder.cancel()
    # The coordinator's loop goes on with the delegation's failure, which says the pool was busy.
    assert kind(events[-1]) == "run_completed" and events[-1].run_completed.content == "went on"
    outcome = await _delegation_outcome(stack, request.session_id)
    assert outcome["outcome"] != "completed", outcome
    assert "busy" in json.dumps(outcome).lower() or "running 2 runs" in json.dumps(outcome), outcome
    assert not [e for e in events if e.agent == "worker"]
