"""The executor's MCP client against servers nobody here wrote, through the whole mesh: the
reference `@modelcontextprotocol/server-everything` (installed by `make install` from
tests/mcp/package.json), which speaks the handshake revisions only, over stdio and streamable
HTTP; and a server built with the official Python SDK, which speaks 2026-07-28 — its elicitation
is asked of a person as a question, and the call goes on with the answer given through the
registry's input-request API (docs/human-in-the-loop.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.tools.mcp_questions import LIVE_REFUSAL
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.mcp_http import serve_http
from tests.integration.executor.support import Stack, calls, kind
from tests.polling import eventually

# The store plays no part here: one backend is enough.
pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("stack", ["sqlite"], indirect=True),
]

EVERYTHING = (
    Path(__file__).parents[2] / "mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
HANDSHAKE_REVISION = "2025-11-25"
MODERN_REVISION = "2026-07-28"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything_url() -> AsyncIterator[str]:
    """The reference server over streamable HTTP, one process for the module."""
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(EVERYTHING),
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )

    async def listening() -> bool:
        assert process.returncode is None, "the reference MCP server exited"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    try:
        await eventually(listening, timeout=30, what="the reference MCP server listens")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def python_sdk_url() -> AsyncIterator[str]:
    """The Python SDK's server (tests/integration/executor/mcp_server.py) over streamable HTTP."""
    async with serve_http() as url:
        yield url


def results(events: list[run_pb2.RunEvent]) -> dict[str, run_pb2.ToolResult]:
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
    by_name = results(events)
    assert by_name["echo"].output == f"Echo: over {transport}"
    assert "5" in by_name["get-sum"].output and not by_name["get-sum"].is_error
    refused = by_name["trigger-elicitation-request"]
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
    assert "reserve" not in results(events)  # the call waits for the answer
    assert kind(events[-1]) == "run_suspended"

    resumed = await respond(stack, project.id, asked.id, answer="4")
    assert results(resumed)["reserve"].output == "reserved t7 for 4"
    assert resumed[-1].run_completed.content == "booked"
