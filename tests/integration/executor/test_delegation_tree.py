"""The tree of runs under one chat is bounded beyond its depth: a delegation back into the
delegation path (A → B → A) is refused unless the agent type allows re-entry, one model step
sends at most so many delegations, and the whole tree at most so many per chat (the executor's
defaults, or the agent type's DelegationLimits). A refusal reaches the delegating model as the
delegation's result — an `error` event with its reason — and the run goes on to its answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.support import Stack, delegate, event_type, final, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"max_delegations_per_step": 2, "max_delegations_per_chat": 50}


def delegate_many(*agents: str) -> dict[str, Any]:
    """A mock response that delegates to each of `agents` in one step."""
    return {
        "content": "",
        "tool_calls": [
            {"name": "delegate", "arguments": {"agent": a, "task": f"task {n}"}} for n, a in enumerate(agents)
        ],
    }


async def test_a_delegation_back_into_the_path_is_refused_as_a_cycle(stack: Stack) -> None:
    project = await stack.project()
    ping = await stack.agent(project, "ping", mock_responses=[delegate("pong", "your turn"), "ping done"])
    await stack.agent(
        project, "pong", network_access=["ping"], mock_responses=[delegate("ping", "yours"), "pong done"]
    )
    config = resources_pb2.AgentConfig()
    config.network_access.values.append("pong")
    await stack.update_config(ping, "config.network_access", config)

    events = await stack.chat(ping, "start the rally")

    assert final(events).run_completed.content == "ping done"
    refused = [e for e in events if kind(e) == "error"]
    assert [(e.agent, e.error.reason) for e in refused] == [("pong", "DELEGATION_CYCLE")]
    assert "ping → pong" in refused[0].error.message
    stored = await stack.events(events[-1].session_id)
    requests = [e for e in stored if event_type(e) == "delegation_request"]
    assert [(e.agent, json.loads(e.content)["agent"]) for e in requests] == [("ping", "pong")]
    # pong's model read the refusal as its delegation's result and answered; ping got that answer.
    (response,) = [e for e in stored if event_type(e) == "delegation_response"]
    assert json.loads(response.content)["outcome"] == "completed"


async def test_one_step_sends_at_most_the_default_number_of_delegations(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["worked"])
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate_many("worker", "worker", "worker"), "coordinated"],
    )

    events = await stack.chat(coordinator, "fan out")

    assert final(events).run_completed.content == "coordinated"
    stored = await stack.events(events[-1].session_id)
    assert len([e for e in stored if event_type(e) == "delegation_request"]) == 2
    responses = [e for e in stored if event_type(e) == "delegation_response"]
    assert [json.loads(e.content)["outcome"] for e in responses] == ["completed", "completed"]
    (error,) = [e for e in stored if event_type(e) == "error"]
    assert error.metadata["reason"] == "DELEGATIONS_PER_STEP_EXCEEDED"
    assert "at most 2" in error.content


async def test_the_whole_tree_under_a_chat_is_bounded_by_the_type_and_the_next_chat_starts_afresh(
    stack: Stack,
) -> None:
    project = await stack.project()
    limits = resources_pb2.DelegationLimits(max_per_chat=3)
    await stack.agent(project, "helper", mock_responses=["helped"])
    await stack.agent(
        project,
        "worker",
        network_access=["helper"],
        mock_responses=[delegate("helper", "help"), "worked"],
        delegation_limits=limits,
    )
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[
            delegate("worker", "one"),
            delegate("worker", "two"),
            delegate("worker", "three"),
            "done",
        ],
        delegation_limits=limits,
    )

    events = await stack.chat(coordinator, "go")

    # coordinator → worker → helper, coordinator → worker (3: the bound) ↛ helper, ↛ worker
    assert final(events).run_completed.content == "done"
    session_id = events[-1].session_id
    stored = await stack.events(session_id)
    requests = [
        (e.agent, json.loads(e.content)["agent"]) for e in stored if event_type(e) == "delegation_request"
    ]
    assert requests == [("coordinator", "worker"), ("worker", "helper"), ("coordinator", "worker")]
    errors = [(e.agent, e.metadata["reason"]) for e in stored if event_type(e) == "error"]
    assert errors == [
        ("worker", "DELEGATIONS_PER_CHAT_EXCEEDED"),
        ("coordinator", "DELEGATIONS_PER_CHAT_EXCEEDED"),
    ]

    # The next chat of the session is a tree of its own.
    again = await stack.chat(coordinator, "go again", session_id=session_id)
    assert final(again).run_completed.content == "done"
    stored = await stack.events(session_id)
    assert len([e for e in stored if event_type(e) == "delegation_request"]) == 6
