"""The agent lifecycle of DESIGN §3 as pure functions: idle ⇄ working, idle|working → paused →
idle, any → terminated (final)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.registry.agents.lifecycle import (
    paused,
    resolve,
    resumed,
    run_finished,
    run_started,
    terminated,
)
from agentmesh.registry.errors import AgentPaused, AgentTerminated, InvalidTransition
from agentmesh.registry.models import Agent, AgentConfig, AgentKind, AgentStatus, AgentType, Project

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=5)


def agent(status: AgentStatus = AgentStatus.IDLE, runs: int = 0, **fields: object) -> Agent:
    values: dict[str, object] = {
        "id": "a1",
        "name": "worker",
        "slug": "worker",
        "project_id": "p1",
        "agent_type_id": "t1",
        "status": status,
        "runs_in_flight": runs,
        "created_at": T0,
        "last_activity_at": T0,
    }
    values.update(fields)
    return Agent.model_validate(values)


@pytest.mark.parametrize("status", [AgentStatus.IDLE, AgentStatus.WORKING])
def test_idle_and_working_agents_pause(status: AgentStatus) -> None:
    result = paused(agent(status), T1)
    assert (result.status, result.last_activity_at) == (AgentStatus.PAUSED, T1)


@pytest.mark.parametrize("status", [AgentStatus.PAUSED, AgentStatus.TERMINATED])
def test_paused_and_terminated_agents_do_not_pause(status: AgentStatus) -> None:
    with pytest.raises(InvalidTransition):
        paused(agent(status), T1)


def test_resume_goes_back_to_idle_or_to_working_while_runs_are_in_flight() -> None:
    assert resumed(agent(AgentStatus.PAUSED), T1).status is AgentStatus.IDLE
    assert resumed(agent(AgentStatus.PAUSED, runs=1), T1).status is AgentStatus.WORKING


@pytest.mark.parametrize("status", [AgentStatus.IDLE, AgentStatus.WORKING, AgentStatus.TERMINATED])
def test_only_paused_agents_resume(status: AgentStatus) -> None:
    with pytest.raises(InvalidTransition):
        resumed(agent(status), T1)


@pytest.mark.parametrize("status", list(AgentStatus))
def test_any_agent_terminates_and_terminating_again_changes_nothing(status: AgentStatus) -> None:
    result = terminated(agent(status), T1)
    assert result.status is AgentStatus.TERMINATED
    assert terminated(result, T1 + timedelta(seconds=1)) is result


def test_runs_make_an_agent_working_until_the_last_one_finishes() -> None:
    first = run_started(agent(), T1)
    second = run_started(first, T1)
    assert (second.status, second.runs_in_flight) == (AgentStatus.WORKING, 2)
    one_left = run_finished(second, T1, completed=True, tokens_used=10, cost=0.1)
    assert (one_left.status, one_left.runs_in_flight) == (AgentStatus.WORKING, 1)
    done = run_finished(one_left, T1, completed=False, tokens_used=5, cost=0.2)
    assert (done.status, done.runs_in_flight) == (AgentStatus.IDLE, 0)
    assert (done.tasks_completed, done.tokens_used, done.cost) == (1, 15, pytest.approx(0.3))


def test_starting_a_run_of_a_paused_or_terminated_agent_is_refused() -> None:
    with pytest.raises(AgentPaused):
        run_started(agent(AgentStatus.PAUSED), T1)
    with pytest.raises(AgentTerminated):
        run_started(agent(AgentStatus.TERMINATED), T1)


@pytest.mark.parametrize("status", [AgentStatus.PAUSED, AgentStatus.TERMINATED])
def test_finishing_keeps_paused_and_terminated(status: AgentStatus) -> None:
    result = run_finished(agent(status, runs=1), T1, completed=True, tokens_used=1, cost=0)
    assert (result.status, result.runs_in_flight, result.tasks_completed) == (status, 0, 1)


def test_resolve_applies_overrides_over_the_type() -> None:
    agent_type = AgentType(
        id="t1",
        name="T",
        slug="t",
        personality_prompt="type prompt",
        primary_model="openai/x",
        model_params={"temperature": 0.1},
        tools=["a"],
        kind=AgentKind.LOOP,
        sub_agents=["w"],
        max_steps=4,
        max_iterations=3,
        created_at=T0,
        updated_at=T0,
    )
    project = Project(id="p1", name="P", slug="p", owner_id="u1", created_at=T0, updated_at=T0)
    plain = resolve(agent(), agent_type, project, {})
    assert (plain.instructions, plain.primary_model, plain.tools, plain.sub_agents) == (
        "type prompt",
        "openai/x",
        ["a"],
        ["w"],
    )
    assert (plain.network_access, plain.mock_responses, plain.kind, plain.project_slug) == (
        [],
        [],
        AgentKind.LOOP,
        "p",
    )
    config = AgentConfig(
        instructions="mine", tools=[], network_access=["w"], mock_responses=["hi"], max_iterations=0
    )
    spec = resolve(agent(config=config), agent_type, project, {})
    assert (spec.instructions, spec.tools, spec.network_access, spec.mock_responses) == (
        "mine",
        [],
        ["w"],
        ["hi"],
    )
    assert (spec.max_steps, spec.max_iterations, spec.model_params) == (4, 0, {"temperature": 0.1})


def test_resolve_names_sub_agents_and_network_by_slug_with_their_names_beside() -> None:
    agent_type = AgentType(
        id="t1",
        name="T",
        slug="t",
        kind=AgentKind.SEQUENTIAL,
        sub_agents=["My Writer", "ghost"],
        created_at=T0,
        updated_at=T0,
    )
    project = Project(id="p1", name="P", slug="p", owner_id="u1", created_at=T0, updated_at=T0)
    siblings = {"my-writer": "My Writer", "reviewer": "Reviewer", "shadow": "reviewer"}
    config = AgentConfig(network_access=["Reviewer", "my-writer"])
    spec = resolve(agent(config=config), agent_type, project, siblings)
    # Unknown references stay as written; a slug wins over another agent's equal name.
    assert spec.sub_agents == ["my-writer", "ghost"]
    assert spec.network_access == ["reviewer", "my-writer"]
    assert spec.agent_names == {"my-writer": "My Writer", "reviewer": "Reviewer"}
