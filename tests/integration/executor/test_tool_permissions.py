"""Tool permissions through the whole mesh: `deny` runs nothing (the tool is not offered, a call to
it is told it is not permitted), the strictest of the type's, the agent's and the project's rules
counts, MCP tools without a rule follow their annotations, a denied delegation is refused, and
`ask` holds the call for a person — approved it runs once (with edited arguments when the
approver edits them), denied or expired it never runs and the model is told why; a workflow's
sub-agent asks the same way, its workflow waiting on it."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import field_mask_pb2, json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import (
    PARALLEL,
    SEQUENTIAL,
    Agent,
    Project,
    Stack,
    calls,
    delegate,
    event_type,
    kind,
    permission_map,
)
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

MCP_SCRIPT = Path(__file__).with_name("mcp_server.py")
OPENAI_KEY = "sk-permissions-test-" + "p" * 30
CLOCK = calls("get_current_time", timezone="UTC")


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {"openai_base_url": openai_server.base_url, "openai_api_key": OPENAI_KEY}


def results(events: list[run_pb2.RunEvent]) -> list[run_pb2.ToolResult]:
    return [event.tool_result for event in events if event.HasField("tool_result")]


def mcp_tools() -> resources_pb2.McpServer:
    return resources_pb2.McpServer(
        name="tools", transport="stdio", command=sys.executable, args=[str(MCP_SCRIPT)]
    )


async def respond(stack: Stack, agent: Agent, request_id: str, **response: Any) -> list[run_pb2.RunEvent]:
    call = stack.client.gateway.RespondToInput(
        gateway_service_pb2.RespondToInputRequest(
            project_id=agent.project.id,
            id=request_id,
            response=json_format.ParseDict(response, run_pb2.InputResponse()),
        ),
        metadata=stack.metadata,
    )
    return [message.event async for message in call]


async def set_project_rules(stack: Stack, project: Project, rules: dict[str, str]) -> None:
    await stack.client.registry.UpdateProject(
        reg.UpdateProjectRequest(
            project=resources_pb2.Project(id=project.id, tool_permissions=permission_map(rules)),
            update_mask=field_mask_pb2.FieldMask(paths=["tool_permissions"]),
        ),
        metadata=stack.metadata,
    )


# -- deny -----------------------------------------------------------------------------------------


async def test_a_denied_tool_is_not_run_and_the_model_is_told(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "clock",
        tools=["get_current_time"],
        tool_permissions={"get_*": "deny"},
        mock_responses=[CLOCK, "I may not look at the clock."],
    )
    events = await stack.chat(agent, "What time is it?")
    (result,) = results(events)
    assert result.is_error and "not permitted" in result.output
    assert events[-1].run_completed.content == "I may not look at the clock."
    # Nothing was asked of a person.
    assert not [e for e in events if e.HasField("input_requested")]


async def test_a_denied_tool_is_not_offered_to_the_model(stack: Stack, openai_server: FakeOpenAI) -> None:
    model = f"gpt-offered-{uuid.uuid4().hex[:6]}"
    openai_server.script(model, Reply(text="Fine."))
    project = await stack.project()
    agent = await stack.agent(
        project,
        "offered",
        model=f"openai/{model}",
        tools=["get_current_time", "ask_user"],
        tool_permissions={"get_current_time": "deny"},
    )
    await stack.chat(agent, "Hi")
    (request,) = openai_server.for_model(model)
    offered = {tool["function"]["name"] for tool in request.body.get("tools", [])}
    assert offered == {"ask_user"}


@pytest.mark.parametrize(
    ("type_rules", "agent_rules", "project_rules"),
    [
        ({"get_current_time": "allow"}, {}, {"*": "deny"}),  # the project's owner tightens
        ({"get_current_time": "deny"}, {"get_current_time": "allow"}, {}),  # a config cannot loosen
        ({}, {"get_*": "deny"}, {"get_current_time": "allow"}),  # nor can a project
    ],
)
async def test_the_strictest_rule_map_counts(
    stack: Stack, type_rules: dict[str, str], agent_rules: dict[str, str], project_rules: dict[str, str]
) -> None:
    project = await stack.project()
    await set_project_rules(stack, project, project_rules)
    agent = await stack.agent(
        project,
        "layered",
        tools=["get_current_time"],
        tool_permissions=type_rules,
        agent_tool_permissions=agent_rules,
        mock_responses=[CLOCK, "done"],
    )
    (result,) = results(await stack.chat(agent, "time?"))
    assert result.is_error and "not permitted" in result.output


async def test_the_most_specific_rule_of_a_map_wins(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "specific",
        tools=["get_current_time"],
        tool_permissions={"*": "deny", "get_*": "ask", "get_current_time": "allow"},
        mock_responses=[CLOCK, "done"],
    )
    (result,) = results(await stack.chat(agent, "time?"))
    assert not result.is_error and result.output.endswith("+00:00")


async def test_mcp_tools_follow_their_annotations_unless_a_rule_says_otherwise(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "annotated",
        mcp_servers=[mcp_tools()],
        tool_permissions={"mcp:tools:add": "deny"},
        mock_responses=[
            {
                "content": "",
                "tool_calls": [
                    {"name": "peek", "arguments": {"key": "k"}},  # readOnlyHint: runs
                    {"name": "erase", "arguments": {"key": "k"}},  # destructiveHint: asks
                    {"name": "add", "arguments": {"a": 1, "b": 2}},  # the rule: denied
                    {"name": "whoami", "arguments": {}},  # no hint, no rule: runs
                ],
            },
            "done",
        ],
    )
    events = await stack.chat(agent, "go")
    by_name = {result.name: result for result in results(events)}
    assert by_name["peek"].output == "value of k"
    assert by_name["add"].is_error and "not permitted" in by_name["add"].output
    assert by_name["whoami"].output.startswith("pid ")
    assert "erase" not in by_name
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.tool == "erase" and asked.kind == run_pb2.INPUT_KIND_APPROVAL
    assert kind(events[-1]) == "run_suspended"
    resumed = await respond(stack, agent, asked.id, decision="INPUT_DECISION_APPROVE")
    assert [r.output for r in results(resumed)] == ["erased k"]
    assert resumed[-1].run_completed.content == "done"


async def test_a_denied_delegation_is_refused(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(project, "payments", mock_responses=["paid"])
    coordinator = await stack.agent(
        project,
        "boss",
        network_access=[worker.name],
        tool_permissions={"delegate:payments": "deny"},
        mock_responses=[delegate(worker.name, "pay"), "could not pay"],
    )
    events = await stack.chat(coordinator, "pay the bill")
    (result,) = results(events)
    assert result.is_error and "not permitted" in result.output
    assert not [e for e in events if e.HasField("delegation_request")]
    assert events[-1].run_completed.content == "could not pay"


@pytest.mark.parametrize("decision", ["INPUT_DECISION_APPROVE", "INPUT_DECISION_DENY"])
async def test_a_delegation_to_approve_is_sent_only_once_approved(stack: Stack, decision: str) -> None:
    project = await stack.project()
    suffix = uuid.uuid4().hex[:6]
    worker = await stack.agent(project, f"payments-{suffix}", mock_responses=["paid"])
    coordinator = await stack.agent(
        project,
        f"boss-{suffix}",
        network_access=[worker.name],
        tool_permissions={"delegate:payments-*": "ask"},
        mock_responses=[delegate(worker.name, "pay"), "settled"],
    )
    session = uuid.uuid4().hex
    events = await stack.chat(coordinator, "pay the bill", session_id=session)
    assert kind(events[-1]) == "run_suspended"
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.tool == f"delegate:{worker.name}" and dict(asked.arguments)["task"] == "pay"
    assert not [e for e in await stack.events(session) if e.agent == worker.name]  # not sent

    resumed = await respond(stack, coordinator, asked.id, decision=decision, reason="not today")
    assert resumed[-1].run_completed.content == "settled"
    (answer,) = [e.delegation_response for e in resumed if e.HasField("delegation_response")]
    logged = await stack.events(session)
    worker_runs = {e.run_id for e in logged if e.agent == worker.name}
    if decision == "INPUT_DECISION_APPROVE":
        assert answer.outcome == run_pb2.DELEGATION_OUTCOME_COMPLETED and answer.content == "paid"
        assert len(worker_runs) == 1
    else:
        assert answer.outcome == run_pb2.DELEGATION_OUTCOME_REFUSED and "not today" in answer.content
        assert not worker_runs
    assert [event_type(e) for e in logged].count("delegation_response") == 1


# -- ask ------------------------------------------------------------------------------------------


async def asking_clock(stack: Stack, *, expiry: int = 0) -> Agent:
    project = await stack.project()
    return await stack.agent(
        project,
        "careful-clock",
        tools=["get_current_time"],
        tool_permissions={"get_current_time": "ask"},
        input_expiry_seconds=expiry,
        mock_responses=[CLOCK, "done"],
    )


async def test_an_approved_call_runs_once_after_the_approval(stack: Stack) -> None:
    agent = await asking_clock(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "time?", session_id=session)
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.tool == "get_current_time" and dict(asked.arguments) == {"timezone": "UTC"}
    assert not results(events)  # held back
    assert await stack.settled_status(agent) == "waiting"

    resumed = await respond(stack, agent, asked.id, decision="INPUT_DECISION_APPROVE")
    (result,) = results(resumed)
    assert not result.is_error and result.output.endswith("+00:00")
    assert resumed[-1].run_completed.content == "done"
    logged = await stack.events(session)
    assert [event_type(e) for e in logged].count("tool_result") == 1
    (received,) = [json.loads(e.content) for e in logged if event_type(e) == "input_received"]
    assert received["decision"] == "approve"


async def test_an_approval_with_edited_arguments_runs_the_edited_call_and_records_both(stack: Stack) -> None:
    agent = await asking_clock(stack)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "time?", session_id=session)
    request_id = events[-1].run_suspended.request_ids[0]
    resumed = await respond(
        stack, agent, request_id, decision="INPUT_DECISION_APPROVE", arguments={"timezone": "Asia/Tokyo"}
    )
    (result,) = results(resumed)
    assert result.output.endswith("+09:00")
    logged = await stack.events(session)
    (intent,) = [json.loads(e.content) for e in logged if event_type(e) == "tool_call"]
    (received,) = [json.loads(e.content) for e in logged if event_type(e) == "input_received"]
    assert intent["arguments"] == {"timezone": "UTC"}  # the model's call, as asked
    assert received["arguments"] == {"timezone": "Asia/Tokyo"}  # what the approver ran


async def test_a_denied_call_never_runs_and_the_model_is_told_why(stack: Stack) -> None:
    agent = await asking_clock(stack)
    events = await stack.chat(agent, "time?")
    request_id = events[-1].run_suspended.request_ids[0]
    resumed = await respond(stack, agent, request_id, decision="INPUT_DECISION_DENY", reason="not now")
    (result,) = results(resumed)
    assert result.is_error and "denied it: not now" in result.output
    assert resumed[-1].run_completed.content == "done"


async def test_an_unanswered_request_expires_into_a_denial(stack: Stack) -> None:
    agent = await asking_clock(stack, expiry=1)
    session = uuid.uuid4().hex
    events = await stack.chat(agent, "time?", session_id=session)
    assert kind(events[-1]) == "run_suspended"

    async def ended() -> bool:
        return any(e.idempotency_key.endswith(":end") for e in await stack.events(session))

    # Nobody answers: at its expiry a live executor takes the run over and tells the model.
    await eventually(ended, timeout=60, what="the run goes on after its request expired")
    logged = await stack.events(session)
    (result,) = [e for e in logged if event_type(e) == "tool_result"]
    assert "nobody approved it" in result.content
    (received,) = [json.loads(e.content) for e in logged if event_type(e) == "input_received"]
    assert received["expired"] is True and received["responder"] == "system"
    (end,) = [e for e in logged if e.idempotency_key.endswith(":end")]
    assert event_type(end) == "agent_response"


@pytest.mark.parametrize("workflow_kind", [SEQUENTIAL, PARALLEL])
async def test_a_workflow_sub_agents_call_waits_for_an_approval_at_the_top(
    stack: Stack, workflow_kind: int
) -> None:
    project = await stack.project()
    suffix = uuid.uuid4().hex[:6]
    clock = await stack.agent(
        project,
        f"clock-{suffix}",
        tools=["get_current_time"],
        tool_permissions={"get_current_time": "ask"},
        mock_responses=[CLOCK, "it is time"],
    )
    helper = await stack.agent(project, f"helper-{suffix}", mock_responses=["helped"])
    pipeline = await stack.agent(
        project, f"pipeline-{suffix}", kind=workflow_kind, sub_agents=[clock.name, helper.name]
    )
    session = uuid.uuid4().hex
    events = await stack.chat(pipeline, "time?", session_id=session)
    top = events[0].run_id
    assert kind(events[-1]) == "run_suspended" and events[-1].run_id == top
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.tool == "get_current_time" and asked.agent == clock.name
    assert list(asked.delegation_path) == [pipeline.name]
    assert not results(events)  # held back
    assert await stack.settled_status(pipeline) == "waiting"

    resumed = await respond(stack, clock, asked.id, decision="INPUT_DECISION_APPROVE")
    assert kind(resumed[-1]) == "run_completed" and resumed[-1].run_id == top
    joined = "helped" if workflow_kind == SEQUENTIAL else "it is time\n\nhelped"
    assert resumed[-1].run_completed.content == joined
    logged = await stack.events(session)
    assert [event_type(e) for e in logged].count("tool_result") == 1
    ends = [e.run_id for e in logged if e.idempotency_key.endswith(":end")]
    assert len(ends) == len(set(ends)) == 3
    assert await stack.settled_status(pipeline) == "idle"
