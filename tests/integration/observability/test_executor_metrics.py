"""What the executor records on a real chat: runs, loop steps, model calls, tool calls and
delegations, and the agent cache and runs in flight it reports at scrape time."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.executor.conftest import executor_settings, registry_settings, stack  # noqa: F401
from tests.integration.executor.support import Stack, calls, delegate, final
from tests.integration.observability.conftest import metric_points
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _total(reader, name: str, **labels: Any) -> float:
    """The sum of the counter `name` (or the count of the histogram) over points with `labels`
    (a label given as None: points without it)."""
    total = 0.0
    for attributes, point in metric_points(reader, name):
        if all(attributes.get(key) == value for key, value in labels.items()):
            total += point.count if hasattr(point, "count") else point.value
    return total


async def test_a_chat_with_a_tool_call_and_a_delegation_is_counted(stack: Stack, metric_reader) -> None:  # noqa: F811
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["Task 7 is done."])
    coordinator = await stack.agent(
        project,
        "coordinator",
        tools=["get_current_time"],
        network_access=["worker"],
        mock_responses=[
            calls("get_current_time"),
            delegate("worker", "Do task 7"),
            "The worker did task 7.",
        ],
    )
    watched = {
        "llm runs": ("agentmesh.runs", {"agentmesh.agent.kind": "llm", "outcome": "completed"}),
        "delegated runs": ("agentmesh.runs", {"outcome": "completed", "agentmesh.delegated": True}),
        "own runs": ("agentmesh.runs", {"outcome": "completed", "agentmesh.delegated": False}),
        "run durations": ("agentmesh.run.duration", {"outcome": "completed"}),
        "steps": ("agentmesh.steps", {"agentmesh.agent.kind": "llm"}),
        "model calls": ("agentmesh.model.calls", {"gen_ai.system": "mock", "error.type": None}),
        "model durations": ("gen_ai.client.operation.duration", {"gen_ai.system": "mock"}),
        "tool calls": ("agentmesh.tool.calls", {"gen_ai.tool.name": "get_current_time", "outcome": "ok"}),
        "tool durations": ("agentmesh.tool.duration", {"gen_ai.tool.name": "get_current_time"}),
        "delegations": ("agentmesh.delegations", {"outcome": "ok", "agentmesh.delegation.depth": 1}),
        "delegation durations": ("agentmesh.delegation.duration", {"outcome": "ok"}),
    }
    before = {what: _total(metric_reader, name, **labels) for what, (name, labels) in watched.items()}

    events = await stack.chat(coordinator, "Please get task 7 done")

    assert final(events).run_completed.content == "The worker did task 7."
    after = {what: _total(metric_reader, name, **labels) for what, (name, labels) in watched.items()}
    grown = {what: after[what] - before[what] for what in watched}
    assert grown == {
        "llm runs": 2,  # the coordinator's and the worker's
        "delegated runs": 1,
        "own runs": 1,
        "run durations": 2,
        "steps": 4,  # coordinator: tool, delegate, answer; worker: answer
        "model calls": 4,  # none with an error type
        "model durations": 4,
        "tool calls": 1,
        "tool durations": 1,
        "delegations": 1,
        "delegation durations": 1,
    }
    # Observed at collection: the executor's cache built both agents; no run is in flight once
    # the runs finished their bookkeeping (right after their answers).
    assert _total(metric_reader, "agentmesh.agent_cache.misses") >= 2
    assert _total(metric_reader, "agentmesh.agent_cache.size") >= 1

    async def no_run_active() -> bool:
        return _total(metric_reader, "agentmesh.runs.active") == 0

    await eventually(no_run_active, what="no run active")


async def test_a_refused_tool_and_a_refused_delegation_are_counted(stack: Stack, metric_reader) -> None:  # noqa: F811
    project = await stack.project()
    agent = await stack.agent(
        project,
        "lonely",
        tools=["get_current_time"],
        mock_responses=[
            {
                "content": "",
                "tool_calls": [
                    {"name": "get_current_time", "arguments": {"timezone": 3}},
                    {"name": "made_up_tool", "arguments": {}},
                    {"name": "delegate", "arguments": {"agent": "nobody", "task": "anything"}},
                ],
            },
            "Alone.",
        ],
    )
    refused_tools = ("agentmesh.tool.calls", {"outcome": "refused"})
    made_up = ("agentmesh.tool.calls", {"gen_ai.tool.name": "made_up_tool"})
    refused_delegations = ("agentmesh.delegations", {"outcome": "refused"})
    watched = [refused_tools, made_up, refused_delegations]
    before = [_total(metric_reader, name, **labels) for name, labels in watched]

    events = await stack.chat(agent, "hello")

    assert final(events).run_completed.content == "Alone."
    after = [_total(metric_reader, name, **labels) for name, labels in watched]
    # Invalid arguments and an unknown tool are refused; the made-up name is no label.
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 0, 1]
