"""A workflow agent whose executor died is resumed from its sub-agent runs in the session's log
(executor workflow.py, resumption.py): each test writes the log a dead executor left —
the workflow's input, the inputs of the sub-agent runs it had started (with their `sub_agent_id`)
and the ends of those that ended — orphans the workflow at the registry and watches the live
executor finish it. A sub-agent whose run ended is not run again (its script would answer
differently: "never asked"); one still going is waited for, not started again (the test records
its end once the workflow is resumed); the first with no run is started.

And a child run outlives its caller's broken stream (outliving.py): a run whose request names its
caller's run goes on to its own end when its stream breaks, and is cancelled when its caller's run
records its end."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from agentmesh.executor.run.outliving import CALLER_WENT_ON
from tests.integration.executor.resume_support import (  # noqa: F401 (module fixtures)
    LEASE_SECONDS,
    DeadRun,
    as_dicts,
    executor_settings,
    final,
    registry_settings,
)
from tests.integration.executor.support import LOOP, PARALLEL, SEQUENTIAL, Agent, Event, EventType, Stack
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

NEVER = "never asked: this sub-agent's run ended before"


class DeadWorkflow(DeadRun):
    """A workflow run as a dead executor left it, with its sub-agent runs."""

    async def start(self, text: str = "go") -> Event:
        (self.input,) = await self.record(self.event(EventType.EVENT_TYPE_USER_MESSAGE, text))
        return self.input

    async def sub_agent(
        self, agent: Agent, step: int, text: str, *, answer: str | None = None, **end: Any
    ) -> str:
        """A sub-agent run the workflow started at `step`; ended with `answer` when given."""
        run_id = uuid.uuid4().hex
        (received,) = await self.record(
            self.event(
                EventType.EVENT_TYPE_USER_MESSAGE,
                text,
                run_id=run_id,
                agent=agent.name,
                parent_event_id=self.input.id,
                as_sub_agent=True,
                sub_agent_id=f"{self.run_id}:{step}",
            )
        )
        if answer is not None:
            await self.end(agent, run_id, received, answer, **end)
        return run_id

    async def end(
        self, agent: Agent, run_id: str, received: Event | None, answer: str, **metadata: Any
    ) -> None:
        await self.record(
            self.event(
                EventType.EVENT_TYPE_AGENT_RESPONSE,
                answer,
                run_id=run_id,
                agent=agent.name,
                parent_event_id=received.id if received else "",
                **metadata,
            )
        )

    async def resumed(self) -> None:
        """Waits until the live executor has resumed the workflow."""

        async def resumed() -> bool:
            events = await self.stack.events(self.session_id)
            return any(
                e.run_id == self.run_id
                and "reason" in e.metadata.fields
                and e.metadata["reason"] == "RUN_RESUMED"
                for e in events
            )

        await eventually(resumed, timeout=LEASE_SECONDS * 20, what=f"workflow {self.run_id} resumed")


def _runs_of(events: list[Event], agent: Agent) -> set[str]:
    return {e.run_id for e in events if e.agent == agent.name}


def _answer(events: list[Event], run_id: str) -> Event:
    (end,) = [e for e in events if e.run_id == run_id and final(e)]
    assert end.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE, end.content
    return end


def _input_of(events: list[Event], agent: Agent) -> list[str]:
    return [
        e.content
        for e in events
        if e.agent == agent.name and e.event_type == EventType.EVENT_TYPE_USER_MESSAGE
    ]


async def test_sequential_skips_ended_sub_agents_and_waits_for_the_one_still_going(stack: Stack) -> None:
    project = await stack.project()
    drafter = await stack.agent(project, "drafter", mock_responses=[NEVER])
    editor = await stack.agent(project, "editor", mock_responses=[NEVER])
    reviewer = await stack.agent(project, "reviewer", mock_responses=["reviewed"])
    pipeline = await stack.agent(
        project, "pipeline", kind=SEQUENTIAL, sub_agents=["drafter", "editor", "reviewer"]
    )
    run = DeadWorkflow(stack, pipeline)
    await run.start("topic")
    drafted = await run.sub_agent(drafter, 1, "topic", answer="the draft")
    editing = await run.sub_agent(editor, 2, "the draft")
    await run.orphan()
    await run.resumed()
    # The editor's run is still going (elsewhere): it is waited for, not started again.
    await asyncio.sleep(LEASE_SECONDS)
    assert _input_of(await stack.events(run.session_id), reviewer) == []
    await run.end(editor, editing, None, "the edit")
    events = await run.ended()

    assert _answer(events, run.run_id).content == "reviewed"
    assert _runs_of(events, drafter) == {drafted}
    assert _runs_of(events, editor) == {editing}
    # The next sub-agent got the answer recorded by the one before.
    assert _input_of(events, reviewer) == ["the edit"]
    (reviewed,) = [
        e for e in events if e.agent == reviewer.name and e.event_type == EventType.EVENT_TYPE_USER_MESSAGE
    ]
    assert reviewed.metadata["sub_agent_id"] == f"{run.run_id}:3"
    assert log_problems(as_dicts(events)) == []
    assert await stack.settled_status(reviewer) == "idle"


async def test_loop_recovers_its_iteration_and_runs_on_from_the_first_step_with_no_run(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=[NEVER])
    checker = await stack.agent(
        project,
        "checker",
        mock_responses=[
            {"content": "final", "tool_calls": [{"name": "exit_loop", "arguments": {"reason": "ok"}}]}
        ],
    )
    loop = await stack.agent(project, "loop", kind=LOOP, sub_agents=["worker", "checker"], max_iterations=3)
    run = DeadWorkflow(stack, loop)
    await run.start("start")
    await run.sub_agent(worker, 1, "start", answer="w1")
    await run.sub_agent(checker, 2, "w1", answer="c1")
    await run.sub_agent(worker, 3, "c1", answer="w2")
    await run.orphan()
    events = await run.ended()

    end = _answer(events, run.run_id)
    assert end.content == "final"
    assert end.metadata["iterations"] == 2
    assert end.metadata["escalated_by"] == "checker"
    assert len(_runs_of(events, worker)) == 2  # neither run again
    assert _input_of(events, checker) == ["w1", "w2"]
    assert log_problems(as_dicts(events)) == []


async def test_loop_with_an_escalation_recorded_ends_without_running_anything(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=[NEVER])
    checker = await stack.agent(project, "checker", mock_responses=[NEVER])
    loop = await stack.agent(project, "loop", kind=LOOP, sub_agents=["worker", "checker"], max_iterations=0)
    run = DeadWorkflow(stack, loop)
    await run.start("start")
    await run.sub_agent(worker, 1, "start", answer="w1")
    await run.sub_agent(checker, 2, "w1", answer="good enough", escalated=True)
    await run.orphan()
    events = await run.ended()

    end = _answer(events, run.run_id)
    assert (end.content, end.metadata["iterations"], end.metadata["escalated_by"]) == (
        "good enough",
        1,
        "checker",
    )
    assert len(_runs_of(events, worker)) == len(_runs_of(events, checker)) == 1
    assert log_problems(as_dicts(events)) == []


async def test_parallel_takes_ended_branches_waits_for_running_ones_and_starts_the_rest(stack: Stack) -> None:
    project = await stack.project()
    first = await stack.agent(project, "first", mock_responses=[NEVER])
    second = await stack.agent(project, "second", mock_responses=[NEVER])
    third = await stack.agent(project, "third", mock_responses=["three"])
    fan = await stack.agent(project, "fan", kind=PARALLEL, sub_agents=["first", "second", "third"])
    run = DeadWorkflow(stack, fan)
    await run.start("q")
    await run.sub_agent(first, 1, "q", answer="one")
    going = await run.sub_agent(second, 2, "q")
    await run.orphan()
    await run.resumed()

    async def third_answered() -> bool:
        return any(e.agent == third.name and final(e) for e in await stack.events(run.session_id))

    await eventually(third_answered, timeout=LEASE_SECONDS * 20, what="the missing branch ran")
    await run.end(second, going, None, "two")
    events = await run.ended()

    assert _answer(events, run.run_id).content == "one\n\ntwo\n\nthree"
    assert len(_runs_of(events, first)) == len(_runs_of(events, second)) == len(_runs_of(events, third)) == 1
    assert log_problems(as_dicts(events)) == []


async def test_a_workflow_whose_sub_agent_runs_have_no_id_is_closed(stack: Stack) -> None:
    project = await stack.project()
    step = await stack.agent(project, "step", mock_responses=[NEVER])
    pipeline = await stack.agent(project, "old-pipeline", kind=SEQUENTIAL, sub_agents=["step"])
    run = DeadWorkflow(stack, pipeline)
    received = await run.start()
    await run.record(
        run.event(
            EventType.EVENT_TYPE_USER_MESSAGE,
            "go",
            run_id=uuid.uuid4().hex,
            agent=step.name,
            parent_event_id=received.id,
            as_sub_agent=True,
        )
    )
    await run.orphan()
    events = await run.ended()

    (end,) = [e for e in events if e.run_id == run.run_id and final(e)]
    assert end.metadata["reason"] == "EXECUTOR_LOST"


SLOW = {"content": "slow answer", "delay_seconds": 2.0}


async def _break_stream_of_child(stack: Stack, agent: Agent, session_id: str, caller_run_id: str) -> str:
    """Starts `agent` as a child of `caller_run_id`, reads its first event, breaks the stream;
    the child's run id."""
    request = stack.run_request(agent, "work", session_id)
    request.caller_run_id = caller_run_id
    request.as_sub_agent = True
    stream = stack.executor.run(request, metadata=stack.metadata)
    run_id = ""
    async for event in stream:
        if event.HasField("run_started"):
            run_id = event.run_id
            break
    await stream.aclose()
    assert run_id
    return run_id


async def test_a_child_outlives_its_callers_broken_stream(stack: Stack) -> None:
    project = await stack.project()
    child = await stack.agent(project, "child", mock_responses=[SLOW])
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    run_id = await _break_stream_of_child(stack, child, session_id, uuid.uuid4().hex)

    async def ends() -> list[Event]:
        return [e for e in await stack.events(session_id) if e.run_id == run_id and final(e)]

    async def ended() -> bool:
        return bool(await ends())

    await eventually(ended, timeout=30, what="the child's own end")
    (end,) = await ends()
    assert (end.event_type, end.content) == (EventType.EVENT_TYPE_AGENT_RESPONSE, "slow answer")
    assert await stack.settled_status(child) == "idle"


async def test_a_child_whose_callers_run_ended_is_cancelled(stack: Stack) -> None:
    project = await stack.project()
    child = await stack.agent(project, "child", mock_responses=[{"content": "late", "delay_seconds": 60}])
    caller = DeadRun(stack, child)
    run_id = await _break_stream_of_child(stack, child, caller.session_id, caller.run_id)
    # The caller was cancelled: it records its end (an error with a code).
    await caller.record(
        caller.event(EventType.EVENT_TYPE_ERROR, "cancelled", code="CANCELLED", cancelled=True)
    )

    async def ends() -> list[Event]:
        return [e for e in await stack.events(caller.session_id) if e.run_id == run_id and final(e)]

    async def ended() -> bool:
        return bool(await ends())

    await eventually(ended, timeout=30, what="the child's cancelled end")
    (end,) = await ends()
    assert end.event_type == EventType.EVENT_TYPE_ERROR
    assert end.metadata["code"] == "CANCELLED"
    assert CALLER_WENT_ON in end.content
    assert await stack.settled_status(child) == "idle"
