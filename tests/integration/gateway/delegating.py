"""A scripted delegating pair for gateway tests: a coordinator that hands one task to a worker,
which answers in a few dozen chunks (so a client can hang up or resume mid-delegation)."""

from __future__ import annotations

from typing import Any

from tests.integration.gateway.support import Agent, Api

WORKER = {"content": "part " * 40, "delay_seconds": 0.005}
DELEGATE = {
    "content": "",
    "tool_calls": [{"name": "delegate", "arguments": {"agent": "worker", "task": "work"}}],
}


async def delegating_agents(api: Api, *, worker_answer: Any = WORKER) -> tuple[Agent, Agent]:
    """(worker, coordinator) of one new owner and project; the coordinator answers "done"."""
    owner = await api.user()
    worker = await api.agent(owner, name="worker", mock_responses=[worker_answer])
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project={"id": worker.project_id, "slug": worker.project_slug},
        network_access=["worker"],
        mock_responses=[DELEGATE, "done"],
    )
    return worker, coordinator
