"""Runs with MCP servers named by their agent's type, and their secrets: a
registered server's tools are used; one that is not registered or cannot be reached
costs the run its tools, not the run, with an `error` event naming it and saying why; and no env or
header value — literal, or read from the executor's environment through `${env:NAME}` — appears in
any answer, event or log line of the mesh.

And MCP servers nobody here wrote, at the revision each speaks: the reference server-everything
(the handshake revisions only) over stdio and streamable HTTP, its request for input inside a live
call refused; the Python SDK's server at 2026-07-28, its elicitation asked of a person as a
question, and the call going on with the answer given through the registry's input-request API
(docs/human-in-the-loop.md)."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.tools.mcp_questions import LIVE_REFUSAL
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.mcp_http import EVERYTHING, serve_http
from tests.integration.executor.support import Stack, calls, event_type, final, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

MCP_SCRIPT = Path(__file__).with_name("mcp_server.py")
HANDSHAKE_REVISION = "2025-11-25"
MODERN_REVISION = "2026-07-28"


def stdio(name: str, **env: str) -> resources_pb2.McpServer:
    return resources_pb2.McpServer(
        name=name, transport="stdio", command=sys.executable, args=[str(MCP_SCRIPT)], env=env
    )


async def register(stack: Stack, server: resources_pb2.McpServer) -> resources_pb2.McpServer:
    request = reg.CreateMcpServerRequest(mcp_server=server)
    return (await stack.client.registry.CreateMcpServer(request, metadata=stack.metadata)).mcp_server


def by_name(name: str) -> resources_pb2.McpServer:
    return resources_pb2.McpServer(name=name)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_a_registered_server_is_used_by_name(stack: Stack, transport: str) -> None:
    project = await stack.project()
    name = unique("calc")
    async with serve_http() as url:
        if transport == "stdio":
            await register(stack, stdio(name))
        else:
            server = resources_pb2.McpServer(name=name, transport="streamable_http", url=url)
            await register(stack, server)
        agent = await stack.agent(
            project, "calculator", mcp_servers=[by_name(name)], mock_responses=[calls("add", a=2, b=3), "5"]
        )
        events = await stack.chat(agent, "add 2 and 3")

    results = [e.tool_result for e in events if kind(e) == "tool_result"]
    assert [(r.name, r.output, r.is_error) for r in results] == [("add", "5", False)]
    assert final(events).run_completed.content == "5"


async def test_a_missing_or_unreachable_server_costs_the_run_its_tools_not_the_run(stack: Stack) -> None:
    project = await stack.project()
    missing, unreachable = unique("later"), unique("gone")
    await register(
        stack,
        resources_pb2.McpServer(name=unreachable, transport="streamable_http", url="http://127.0.0.1:9/mcp"),
    )
    agent = await stack.agent(
        project,
        "resilient",
        mcp_servers=[by_name(missing), by_name(unreachable)],
        mock_responses=[calls("add", a=1, b=1), "went on"],
    )
    session = unique("session")
    events = await stack.chat(agent, "try", session_id=session)

    assert final(events).run_completed.content == "went on"
    streamed = {e.error.message for e in events if kind(e) == "error"}
    stored = [e for e in await stack.events(session) if event_type(e) == "error"]
    assert {e.content for e in stored} == streamed and len(stored) == 2
    why = {e.metadata["server"]: e.content for e in stored}
    assert {e.metadata["reason"] for e in stored} == {"MCP_SERVER_UNAVAILABLE"}
    assert "is not registered" in why[missing] or "no MCP server of that name" in why[missing]
    assert "cannot connect" in why[unreachable]
    # Without the server, the model's call of its tool is answered as an unknown tool.
    result = next(e.tool_result for e in events if kind(e) == "tool_result")
    assert result.is_error and "unknown tool 'add'" in result.output

    # Registered now: the session's next run builds the agent again and has the tools.
    await register(stack, stdio(missing))
    await stack.settled(agent)
    again = await stack.chat(agent, "try again", session_id=session)
    results = [e.tool_result for e in again if kind(e) == "tool_result"]
    assert [(r.output, r.is_error) for r in results] == [("2", False)]
    assert {e.error.message for e in again if kind(e) == "error"} == {why[unreachable]}


async def test_no_secret_leaves_the_executor(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # the services log at INFO (a driver's DEBUG lines echo SQL values)
    env_secret = f"env-secret-{uuid.uuid4().hex}"  # only in the executor's environment
    literal_secret = f"literal-secret-{uuid.uuid4().hex}"  # stored in the registry
    header_secret = f"header-secret-{uuid.uuid4().hex}"
    variable = f"AGENTMESH_TEST_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, env_secret)
    secrets = (env_secret, literal_secret, header_secret)
    project = await stack.project()
    from_env, literal, remote, unset = (
        unique("from-env"),
        unique("literal"),
        unique("remote"),
        unique("unset"),
    )
    async with serve_http() as url:
        answers = [
            await register(stack, stdio(from_env, TEST_GREETING=f"${{env:{variable}}}")),
            await register(stack, stdio(literal, TEST_GREETING=literal_secret)),
            await register(
                stack,
                resources_pb2.McpServer(
                    name=remote, transport="streamable_http", url=url, headers={"X-Api-Key": header_secret}
                ),
            ),
            await register(stack, stdio(unset, TEST_GREETING="${env:AGENTMESH_TEST_NEVER_SET}")),
        ]
        agents = [
            # A literal value, and a server whose variable is not set (a run without its tools).
            await stack.agent(
                project,
                "literal",
                mcp_servers=[by_name(literal), by_name(unset)],
                mock_responses=[calls("whoami"), f"the greeting was {literal_secret}"],  # repeated!
            ),
            # A header: the tool answers what the HTTP server received.
            await stack.agent(
                project,
                "remote",
                mcp_servers=[by_name(remote)],
                mock_responses=[
                    {"content": "", "tool_calls": [{"name": "header", "arguments": {"name": "X-Api-Key"}}]},
                    "done",
                ],
            ),
            # A value read from the executor's environment.
            await stack.agent(
                project, "from-env", mcp_servers=[by_name(from_env)], mock_responses=[calls("whoami"), "done"]
            ),
        ]
        session = unique("leak")
        events = []
        for agent in agents:
            events += await stack.chat(agent, "tell me", session_id=session)

    results = [e.tool_result for e in events if kind(e) == "tool_result"]
    # The servers got the values (the tools echo them), and the echoes left scrubbed.
    assert results[0].output.endswith("[redacted]") and results[1].output == "[redacted]"
    assert results[2].output.endswith("[redacted]")
    unset_error = next(e.error.message for e in events if kind(e) == "error")
    assert "AGENTMESH_TEST_NEVER_SET" in unset_error and "not set" in unset_error

    stored = await stack.events(session)
    gateway = stack.mesh.gateway.http.url
    headers = {"Authorization": f"Bearer {stack.token}"}
    async with httpx.AsyncClient(base_url=gateway, headers=headers) as http:
        rest = [
            await http.get(
                f"/api/v1/projects/{project.id}/sessions/{session}/events", params={"page_size": 1000}
            ),
            await http.get("/api/v1/mcp-servers", params={"page_size": 1000}),
            await http.get(f"/api/v1/mcp-servers/{answers[1].id}"),
        ]
    assert all(response.status_code == 200 for response in rest)
    seen = [str(answers), str(events), str(stored), *(r.text for r in rest), caplog.text]
    for secret in secrets:
        assert not any(secret in text for text in seen), secret


# -- protocol revisions, against servers nobody here wrote -------------------------------------


def results_by_name(events: list[run_pb2.RunEvent]) -> dict[str, run_pb2.ToolResult]:
    return {event.tool_result.name: event.tool_result for event in events if event.HasField("tool_result")}


async def respond(stack: Stack, project_id: str, request_id: str, **response: Any) -> list[run_pb2.RunEvent]:
    call = stack.client.gateway.RespondToInput(
        gateway_service_pb2.RespondToInputRequest(
            project_id=project_id,
            id=request_id,
            response=json_format.ParseDict(response, run_pb2.InputResponse()),
        ),
        metadata=stack.metadata,
    )
    return [message.event async for message in call]


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_the_reference_server_is_spoken_to_at_its_handshake_revision(
    stack: Stack, everything_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"everything-{transport.replace('_', '-')}"
    if transport == "stdio":
        server = resources_pb2.McpServer(name=name, transport="stdio", command="node", args=[str(EVERYTHING)])
    else:
        server = resources_pb2.McpServer(name=name, transport="streamable_http", url=everything_url)
    project = await stack.project()
    agent = await stack.agent(
        project,
        "reference",
        mcp_servers=[server],
        mock_responses=[
            {
                "content": "",
                "tool_calls": [
                    {"name": "echo", "arguments": {"message": f"over {transport}"}},
                    {"name": "get-sum", "arguments": {"a": 2, "b": 3}},
                    # It asks for input in the middle of the call: refused at this revision.
                    {"name": "trigger-elicitation-request", "arguments": {}},
                ],
            },
            "done",
        ],
    )
    with caplog.at_level(logging.INFO, logger="agentmesh.executor.tools.mcp"):
        events = await stack.chat(agent, "go")
    named = results_by_name(events)
    assert named["echo"].output == f"Echo: over {transport}"
    assert "5" in named["get-sum"].output and not named["get-sum"].is_error
    refused = named["trigger-elicitation-request"]
    assert refused.is_error and LIVE_REFUSAL in refused.output
    assert not [e for e in events if e.HasField("input_requested")]
    assert events[-1].run_completed.content == "done"
    assert f"MCP server {name!r} speaks protocol revision {HANDSHAKE_REVISION}" in caplog.text


async def test_a_2026_servers_question_is_asked_and_its_call_goes_on_with_the_answer(
    stack: Stack, python_sdk_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = resources_pb2.McpServer(name="bookings", transport="streamable_http", url=python_sdk_url)
    project = await stack.project()
    agent = await stack.agent(
        project, "booker", mcp_servers=[server], mock_responses=[calls("reserve", table="t7"), "booked"]
    )
    with caplog.at_level(logging.INFO, logger="agentmesh.executor.tools.mcp"):
        events = await stack.chat(agent, "book table 7")
    assert f"MCP server 'bookings' speaks protocol revision {MODERN_REVISION}" in caplog.text
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]
    assert asked.kind == run_pb2.INPUT_KIND_QUESTION and asked.tool == "reserve"
    assert asked.question.startswith("bookings (reserve) asks: How many seats at t7?")
    assert "reserve" not in results_by_name(events)  # the call waits for the answer
    assert kind(events[-1]) == "run_suspended"

    resumed = await respond(stack, project.id, asked.id, answer="4")
    assert results_by_name(resumed)["reserve"].output == "reserved t7 for 4"
    assert resumed[-1].run_completed.content == "booked"


async def test_a_declined_question_is_sent_to_the_server_as_decline(
    stack: Stack, python_sdk_url: str
) -> None:
    server = resources_pb2.McpServer(name="bookings", transport="streamable_http", url=python_sdk_url)
    project = await stack.project()
    agent = await stack.agent(
        project, "booker", mcp_servers=[server], mock_responses=[calls("reserve", table="t9"), "not booked"]
    )
    events = await stack.chat(agent, "book table 9")
    (asked,) = [e.input_requested.request for e in events if e.HasField("input_requested")]

    resumed = await respond(stack, project.id, asked.id, decision="INPUT_DECISION_DENY", reason="no table")
    (received,) = [e for e in await stack.events(asked.session_id) if event_type(e) == "input_received"]
    assert json.loads(received.content)["decision"] == "deny"
    # The server's resolver got `decline` (not `cancel`, which an expiry sends) and failed its call.
    declined = results_by_name(resumed)["reserve"]
    assert declined.is_error and "elicitation was decline" in declined.output
    assert resumed[-1].run_completed.content == "not booked"
