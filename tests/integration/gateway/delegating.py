"""A scripted delegating pair for gateway tests: a coordinator that hands one task to a worker,
which answers in a few dozen chunks (so a client can hang up or resume mid-delegation)."""

from __future__ import annotations

from typing import Any

from tests.integration.gateway.support import Agent, Api, asking_agent

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


async def asking_worker_and_coordinator(api: Api, question: str, worker_answer: str) -> tuple[Agent, Agent]:
    """(worker, coordinator): the worker asks a person `question`, then answers `worker_answer`;
    the coordinator delegates to it, then answers "Coordinated."."""
    worker = await asking_agent(api, question, worker_answer)
    delegation = {"name": "delegate", "arguments": {"agent": worker.name, "task": "pick a city"}}
    coordinator = await api.agent(
        worker.owner,
        name="coordinator",
        project={"id": worker.project_id, "slug": worker.project_slug},
        mock_responses=[{"content": "", "tool_calls": [delegation]}, "Coordinated."],
        network_access=[worker.name],
    )
    return worker, coordinator
