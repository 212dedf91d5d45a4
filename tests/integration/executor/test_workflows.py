"""Workflow agents through the whole mesh: sequential, parallel and loop agents run their
sub-agents on executors over gRPC; an escalation (`exit_loop`) ends the innermost loop only,
after the escalating sub-agent's events."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.executor.support import LOOP, PARALLEL, SEQUENTIAL, Stack, event_type, final, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"loop_safety_max_iterations": 3}


def exit_loop(content: str, reason: str = "done") -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": "exit_loop", "arguments": {"reason": reason}}]}


def answers(stored) -> list[str]:
    """Who answered, in the order the answers were recorded."""
    return [e.agent for e in stored if event_type(e) == "agent_response"]


async def test_sequential_runs_each_sub_agent_once_in_order_on_the_previous_answer(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "drafter", mock_responses=["a draft"])
    await stack.agent(project, "reviewer", mock_responses=["a reviewed draft"])
    pipeline = await stack.agent(project, "pipeline", kind=SEQUENTIAL, sub_agents=["drafter", "reviewer"])

    events = await stack.chat(pipeline, "write something")

    done = final(events)
    assert done.agent == "pipeline" and done.run_completed.content == "a reviewed draft"
    assert done.run_completed.steps == 2
    assert {tuple(e.delegation_path) for e in events if e.agent != "pipeline"} == {("pipeline",)}
    stored = await stack.events(events[-1].session_id)
    assert [(e.agent, event_type(e), e.content) for e in stored] == [
        ("pipeline", "user_message", "write something"),
        ("drafter", "user_message", "write something"),
        ("drafter", "agent_response", "a draft"),
        ("reviewer", "user_message", "a draft"),
        ("reviewer", "agent_response", "a reviewed draft"),
        ("pipeline", "agent_response", "a reviewed draft"),
    ]
    assert stored[1].metadata["as_sub_agent"] is True
    assert stored[1].parent_event_id == stored[0].id


async def test_parallel_runs_branches_at_once_and_joins_answers_in_sub_agent_order(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "slow", mock_responses=[{"content": "slow answer", "delay_seconds": 0.2}])
    await stack.agent(project, "fast", mock_responses=["fast answer"])
    fan = await stack.agent(project, "fan", kind=PARALLEL, sub_agents=["slow", "fast"])

    events = await stack.chat(fan, "both of you")

    assert final(events).run_completed.content == "slow answer\n\nfast answer"
    stored = await stack.events(events[-1].session_id)
    assert answers(stored) == ["fast", "slow", "fan"], "the branches ran at once: the fast one finished first"
    inputs = {e.agent: e.content for e in stored if event_type(e) == "user_message"}
    assert inputs == {"fan": "both of you", "slow": "both of you", "fast": "both of you"}


async def test_a_loop_runs_up_to_max_iterations(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "polisher", mock_responses=["polished"])
    loop = await stack.agent(project, "polish-loop", kind=LOOP, sub_agents=["polisher"], max_iterations=2)

    events = await stack.chat(loop, "polish this")

    done = final(events).run_completed
    assert (done.content, done.steps, done.max_steps_reached, done.escalated) == ("polished", 2, False, False)
    assert answers(await stack.events(events[-1].session_id)) == ["polisher", "polisher", "polish-loop"]


async def test_a_loop_without_a_bound_stops_at_the_safety_cap_and_says_so(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "tinkerer", mock_responses=["tinkered"])
    loop = await stack.agent(project, "forever", kind=LOOP, sub_agents=["tinkerer"], max_iterations=0)

    events = await stack.chat(loop, "go")

    done = final(events).run_completed
    assert (done.steps, done.max_steps_reached) == (3, True)


async def test_escalation_ends_the_innermost_loop_only(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["worked"])
    await stack.agent(project, "checker", mock_responses=[exit_loop("good enough", reason="inner loop done")])
    await stack.agent(project, "reporter", mock_responses=["reported"])
    await stack.agent(project, "inner", kind=LOOP, sub_agents=["worker", "checker"], max_iterations=0)
    outer = await stack.agent(project, "outer", kind=LOOP, sub_agents=["inner", "reporter"], max_iterations=2)

    events = await stack.chat(outer, "start")

    done = final(events).run_completed
    assert done.content == "reported"
    assert (done.escalated, done.max_steps_reached, done.steps) == (False, False, 4)
    stored = await stack.events(events[-1].session_id)
    assert answers(stored) == [
        "worker",
        "checker",
        "inner",
        "reporter",
        "worker",
        "checker",
        "inner",
        "reporter",
        "outer",
    ]
    # The escalating sub-agent's events all come before its loop ends.
    checker_run = [(e.agent, event_type(e)) for e in stored if e.agent in ("checker", "inner")][:6]
    assert checker_run == [
        ("inner", "user_message"),
        ("checker", "user_message"),
        ("checker", "tool_call"),
        ("checker", "tool_result"),
        ("checker", "escalation"),
        ("checker", "agent_response"),
    ]
    escalations = [e for e in stored if event_type(e) == "escalation"]
    assert [e.content for e in escalations] == ["inner loop done", "inner loop done"]
    streamed = [e for e in events if kind(e) == "escalation"]
    assert len(streamed) == 2 and all(list(e.delegation_path) == ["outer", "inner"] for e in streamed)
    inner_done = [e.run_completed for e in events if e.agent == "inner" and kind(e) == "run_completed"]
    assert [d.escalated for d in inner_done] == [False, False], "the inner loop consumed the escalation"


async def test_an_escalation_passes_through_a_sequential_agent_to_its_loop(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(project, "first", mock_responses=[exit_loop("stop here")])
    await stack.agent(project, "second", mock_responses=["never"])
    await stack.agent(project, "steps", kind=SEQUENTIAL, sub_agents=["first", "second"])
    loop = await stack.agent(project, "until-done", kind=LOOP, sub_agents=["steps"], max_iterations=3)

    events = await stack.chat(loop, "go")

    assert final(events).run_completed.content == "stop here"
    assert answers(await stack.events(events[-1].session_id)) == ["first", "steps", "until-done"]


async def test_a_failing_sub_agent_fails_the_workflow(stack: Stack) -> None:
    project = await stack.project()
    sleeper = await stack.agent(project, "sleeper", mock_responses=["zzz"])
    pipeline = await stack.agent(project, "pipeline", kind=SEQUENTIAL, sub_agents=["sleeper"])
    await stack.pause(sleeper)

    events = await stack.chat(pipeline, "go")

    failed = final(events).run_failed
    assert failed.code == "FAILED_PRECONDITION" and "sleeper" in failed.message
    assert (await stack.settled_status(pipeline)) == "idle"
