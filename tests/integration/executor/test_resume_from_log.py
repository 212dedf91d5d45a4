"""A run whose executor died is resumed from the session's log by the executor that takes it over
(executor resumption.py): each test writes the log a dead executor left — its
input, the intent events of the step it was in, some results — starts the run at the registry as
held by an executor that never renews (`dead-executor`), and watches the live executor take it
over once its lease expires and finish it.

The agents run the `mock` model: its script answers the i-th model call of a run with item i, so a
resumed run that answers "done" (the script's second item) did not ask its logged step 1 again. The
test's MCP server counts its own calls in a file: `record` is not idempotent, `lookup` is."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from tests.counting import calls, counting_server
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.resume_support import (  # noqa: F401 (module fixtures)
    LEASE_SECONDS,
    DeadRun,
    as_dicts,
    executor_settings,
    final,
    registry_settings,
    step,
)
from tests.integration.executor.support import EventType, Stack
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

ACT = {"content": "", "tool_calls": [{"name": "record", "arguments": {"note": "n"}}]}


async def test_logged_step_is_not_asked_again_and_tool_calls_resume_by_idempotency(
    stack: Stack, tmp_path: Path
) -> None:
    count_file = tmp_path / "calls.txt"
    project = await stack.project()
    agent = await stack.agent(
        project, "resumer", mock_responses=[ACT, "done"], mcp_servers=[counting_server(count_file)]
    )
    run = DeadRun(stack, agent)
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    record, lookup, answered = await run.record(
        run.event(
            EventType.EVENT_TYPE_TOOL_CALL,
            {"name": "record", "arguments": {"note": "n"}},
            parent_event_id=received.id,
            **step("c1", 0, tool="record"),
        ),
        run.event(
            EventType.EVENT_TYPE_TOOL_CALL,
            {"name": "lookup", "arguments": {"key": "k"}},
            parent_event_id=received.id,
            **step("c2", 1, tool="lookup"),
        ),
        run.event(
            EventType.EVENT_TYPE_TOOL_CALL,
            {"name": "record", "arguments": {"note": "kept"}},
            parent_event_id=received.id,
            **step("c3", 2, tool="record"),
        ),
    )
    await run.record(
        run.event(
            EventType.EVENT_TYPE_TOOL_RESULT,
            "recorded kept",
            parent_event_id=answered.id,
            call_id="c3",
            tool="record",
            is_error=False,
        )
    )
    await run.orphan()
    events = await run.ended()

    mine = [e for e in events if e.run_id == run.run_id]
    results = {e.parent_event_id: e for e in mine if e.event_type == EventType.EVENT_TYPE_TOOL_RESULT}
    # The answered step was not asked again: the script's second item is the answer.
    (response,) = [e for e in mine if e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE]
    assert response.content == "done"
    # The non-idempotent call with no result is in doubt: not run, the model told so.
    assert results[record.id].metadata.fields["in_doubt"].bool_value is True
    assert "unknown" in results[record.id].content
    assert calls(count_file, "record") == 0
    # The idempotent one is run again.
    assert results[lookup.id].content == "value of k"
    assert "in_doubt" not in results[lookup.id].metadata.fields
    assert calls(count_file, "lookup") == 1
    # The recorded result is reused, not recorded (or run) again.
    assert sum(e.parent_event_id == answered.id for e in mine) == 1
    resumed = [e for e in mine if e.metadata.fields.get("reason") and e.metadata["reason"] == "RUN_RESUMED"]
    assert len(resumed) == 1
    assert log_problems(as_dicts(events)) == []
    assert await stack.settled_status(agent) == "idle"


async def test_open_delegation_is_answered_from_its_delegated_runs_end(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=["the worker's fresh answer"])
    boss = await stack.agent(
        project, "boss", mock_responses=[{"content": "", "tool_calls": []}, "done"], network_access=["worker"]
    )
    run = DeadRun(stack, boss)
    delegation_id = uuid.uuid4().hex
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    (request,) = await run.record(
        run.event(
            EventType.EVENT_TYPE_DELEGATION_REQUEST,
            {"agent": "worker", "task": "work"},
            delegation_id=delegation_id,
            parent_event_id=received.id,
            target_agent="worker",
            **step("d1", 0),
        )
    )
    # The delegated run ran elsewhere and ended; the dead executor never recorded the response.
    child_run = uuid.uuid4().hex
    (child_input,) = await run.record(
        run.event(
            EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED,
            "work",
            run_id=child_run,
            agent=worker.name,
            delegation_id=delegation_id,
            parent_event_id=request.id,
        )
    )
    await run.record(
        run.event(
            EventType.EVENT_TYPE_AGENT_RESPONSE,
            "the child's recorded answer",
            run_id=child_run,
            agent=worker.name,
            delegation_id=delegation_id,
            parent_event_id=child_input.id,
        )
    )
    await run.orphan()
    events = await run.ended()

    (response,) = [e for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE]
    assert response.delegation_id == delegation_id
    assert json.loads(response.content) == {
        "agent": "worker",
        "outcome": "completed",
        "content": "the child's recorded answer",
    }
    # The delegated run was not run again.
    assert {e.run_id for e in events if e.agent == worker.name} == {child_run}
    (answer,) = [
        e for e in events if e.run_id == run.run_id and e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE
    ]
    assert answer.content == "done"
    assert log_problems(as_dicts(events)) == []


async def test_a_delegation_no_run_received_is_sent_again_under_its_id(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "worker", mock_responses=["the worker's answer"])
    boss = await stack.agent(project, "boss", mock_responses=["unused", "done"], network_access=["worker"])
    run = DeadRun(stack, boss)
    delegation_id = uuid.uuid4().hex
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    await run.record(
        run.event(
            EventType.EVENT_TYPE_DELEGATION_REQUEST,
            {"agent": "worker", "task": "work"},
            delegation_id=delegation_id,
            parent_event_id=received.id,
            **step("d1", 0),
        )
    )
    await run.orphan()
    events = await run.ended()

    (response,) = [e for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE]
    assert json.loads(response.content)["content"] == "the worker's answer"
    child_inputs = [e for e in events if e.event_type == EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED]
    assert [e.delegation_id for e in child_inputs] == [delegation_id]
    assert log_problems(as_dicts(events)) == []
    assert await stack.settled_status(worker) == "idle"


async def test_a_run_resumed_too_often_fails_with_the_reason(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "flaky", mock_responses=["never asked"])
    run = DeadRun(stack, agent)
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    await run.record(
        *(
            run.event(
                EventType.EVENT_TYPE_ERROR, "resumed", parent_event_id=received.id, reason="RUN_RESUMED"
            )
            for _ in range(3)
        )
    )
    await run.orphan()
    events = await run.ended()

    (end,) = [e for e in events if final(e)]
    assert end.event_type == EventType.EVENT_TYPE_ERROR
    assert end.metadata["reason"] == "RESUME_LIMIT"
    assert "resumed 3 times" in end.content


async def test_a_resumed_run_is_counted_in_while_it_runs_and_its_usage_once(stack: Stack) -> None:
    """The registry counted the run out when it orphaned it; the taker counts it
    in again when it resumes it, so the agent is `working` while the resumed run goes on, and its
    end adds its usage and completed task once (registry `RenewRunLeasesRequest.resumed`)."""
    project = await stack.project()
    slow = {"content": "done", "delay_seconds": 4, "usage": {"input_tokens": 30, "output_tokens": 12}}
    agent = await stack.agent(project, "counted", mock_responses=[slow])
    run = DeadRun(stack, agent)
    await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    await run.orphan()
    before = await stack.get(agent)
    assert (before.tasks_completed, before.tokens_used) == (0, 0)

    async def resumed_and_working() -> bool:
        events = await stack.events(run.session_id)
        resumed = any(
            e.metadata.fields.get("reason") and e.metadata["reason"] == "RUN_RESUMED" for e in events
        )
        return resumed and await stack.status(agent) == "working"

    # The dead executor's lease expires (the agent is counted out: idle), the live one resumes
    # the run: counted in again while the slow model answers.
    await eventually(
        resumed_and_working, timeout=LEASE_SECONDS * 20, what="the resumed run counts as working"
    )
    events = await run.ended()
    assert not any(
        e.run_id == run.run_id and final(e) and e.event_type == EventType.EVENT_TYPE_ERROR for e in events
    )

    # Counted when the run's end reaches the registry, which on a loaded host may come after the
    # agent reads idle (a late lease renewal counts the run out first): waited for, then exact.
    async def counted() -> bool:
        return (await stack.get(agent)).tasks_completed >= 1

    await eventually(counted, timeout=60, what="the resumed run's end counted")
    assert await stack.settled_status(agent) == "idle"
    settled = await stack.get(agent)
    assert (settled.tasks_completed, settled.tokens_used) == (1, 42)
    assert log_problems(as_dicts(events)) == []


async def test_a_resumed_run_goes_on_with_its_messages_model_settings(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    """A chat's per-message model settings are recorded in its input event's
    metadata, and the run resumed from that log asks the model with them."""
    model = f"resume-{uuid.uuid4().hex[:8]}"
    openai_server.script(model, Reply(text="answered"))
    project = await stack.project()
    agent = await stack.agent(project, "tuned", model=f"openai/{model}", model_params={"temperature": 0.1})
    settings = run_pb2.ModelSettings(temperature=0.7, max_tokens=33, reasoning_effort="low")
    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=agent.ref, message="hi", model_settings=settings),
        metadata=stack.metadata,
    )
    chatted = [response.event async for response in call]
    (recorded,) = [
        e
        for e in await stack.events(chatted[-1].session_id)
        if e.event_type == EventType.EVENT_TYPE_USER_MESSAGE
    ]
    assert MessageToDict(recorded.metadata)["model_settings"] == {
        "temperature": 0.7,
        "max_tokens": 33,
        "reasoning_effort": "low",
    }
    asked = len(openai_server.for_model(model))

    # A dead executor's run of a message with those settings, its input recorded the same way.
    run = DeadRun(stack, agent)
    received = run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go on")
    received.metadata.CopyFrom(recorded.metadata)
    await run.record(received)
    await run.orphan()
    events = await run.ended()

    (answer,) = [
        e for e in events if e.run_id == run.run_id and e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE
    ]
    assert answer.content == "answered"
    (request,) = openai_server.for_model(model)[asked:]
    assert (request.body["temperature"], request.body["max_tokens"]) == (0.7, 33)
    assert request.body["reasoning_effort"] == "low"


async def test_a_logged_steps_usage_is_counted_once_by_the_run_that_resumes_it(
    stack: Stack, tmp_path: Path
) -> None:
    """Usage counters stay exact: a model step's usage is recorded on its first
    intent event, so a run resumed past that step — not asking it again — still counts it, once,
    beside what it asks itself."""
    step_usage = {"input_tokens": 100, "output_tokens": 8}
    answer = {"content": "done", "usage": {"input_tokens": 30, "output_tokens": 12}}
    project = await stack.project()
    tools = [counting_server(tmp_path / "calls.txt")]
    live = await stack.agent(
        project, "live", mock_responses=[{**ACT, "usage": step_usage}, answer], mcp_servers=tools
    )
    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=live.ref, message="go"), metadata=stack.metadata
    )
    chatted = [response.event async for response in call]
    logged = await stack.events(chatted[-1].session_id)
    (intent,) = [e for e in logged if e.event_type == EventType.EVENT_TYPE_TOOL_CALL]
    assert MessageToDict(intent.metadata)["usage"] == {**step_usage, "cost": 0}
    assert await stack.settled_status(live) == "idle"
    assert (await stack.get(live)).tokens_used == 150  # an unkilled run: both steps

    agent = await stack.agent(project, "resumed", mock_responses=[ACT, answer], mcp_servers=tools)
    run = DeadRun(stack, agent)
    (received,) = await run.record(run.event(EventType.EVENT_TYPE_USER_MESSAGE, "go"))
    (called,) = await run.record(
        run.event(
            EventType.EVENT_TYPE_TOOL_CALL,
            {"name": "record", "arguments": {"note": "n"}},
            parent_event_id=received.id,
            **step("c1", 0, tool="record", usage=step_usage),
        )
    )
    await run.record(
        run.event(
            EventType.EVENT_TYPE_TOOL_RESULT,
            "recorded n",
            parent_event_id=called.id,
            call_id="c1",
            tool="record",
            is_error=False,
        )
    )
    await run.orphan()
    await run.ended()

    # The logged step's 108 tokens and the resumed run's own 42, as for the unkilled run. Counted
    # when the run's end reaches the registry: on a loaded host the lease may expire first and
    # the agent read idle before the end is delivered, so the count is waited for.
    async def counted() -> bool:
        return (await stack.get(agent)).tokens_used >= 150

    await eventually(counted, timeout=60, what="the resumed run's usage counted")
    assert await stack.settled_status(agent) == "idle"
    assert (await stack.get(agent)).tokens_used == 150
