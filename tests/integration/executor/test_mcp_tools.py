"""MCP servers as tool sources, over stdio (a real server process) and streamable HTTP: their
tools are listed with their schemas, called, validated, and their errors fed back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentmesh.executor.tools.base import ToolError
from agentmesh.executor.tools.mcp import McpConnection
from agentmesh.executor.tools.toolset import ToolSet
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.egress import LOOPBACK, EgressPolicy
from tests.integration.executor.mcp_http import serve_http

SERVER_SCRIPT = Path(__file__).with_name("mcp_server.py")
# The test servers listen on loopback, which the egress policy refuses unless allowed.
LOOPBACK_ALLOWED = EgressPolicy(LOOPBACK)


def stdio_server(**env: str) -> resources_pb2.McpServer:
    return resources_pb2.McpServer(
        name="test-tools", transport="stdio", command=sys.executable, args=[str(SERVER_SCRIPT)], env=env
    )


async def exercise(connection: McpConnection) -> ToolSet:
    tools = ToolSet(connection.tools)
    assert {"add", "whoami", "wait", "fail"} <= set(tools.names)
    add = next(spec for spec in tools.specs() if spec.name == "add")
    assert add.parameters["required"] == ["a", "b"]
    assert (await tools.call("add", {"a": 2, "b": 3}, timeout_seconds=5)).text == "5"
    bad = await tools.call("add", {"a": "two", "b": 3}, timeout_seconds=5)
    assert bad.is_error and "'two' is not of type 'integer'" in bad.text
    failed = await tools.call("fail", {"message": "no such file"}, timeout_seconds=5)
    assert failed.is_error and "no such file" in failed.text
    slow = await tools.call("wait", {"seconds": 5}, timeout_seconds=0.2)
    assert slow.is_error and "timed out" in slow.text
    return tools


async def test_a_stdio_server_is_a_tool_source() -> None:
    connection = await McpConnection(stdio_server(TEST_GREETING="hello")).open()
    try:
        tools = await exercise(connection)
        whoami = await tools.call("whoami", {}, timeout_seconds=5)
        assert whoami.text.startswith("pid ") and whoami.text.endswith("hello")
        assert connection.alive
    finally:
        await connection.aclose()
    assert not connection.alive


async def test_a_streamable_http_server_is_a_tool_source() -> None:
    async with serve_http() as url:
        server = resources_pb2.McpServer(name="http-tools", transport="streamable_http", url=url)
        connection = await McpConnection(server, egress=LOOPBACK_ALLOWED).open()
        try:
            await exercise(connection)
        finally:
            await connection.aclose()


async def test_a_streamable_http_server_on_loopback_is_refused_unless_allowed() -> None:
    async with serve_http() as url:
        for host in ("127.0.0.1", "localhost"):
            server = resources_pb2.McpServer(
                name="local-tools", transport="streamable_http", url=url.replace("127.0.0.1", host)
            )
            with pytest.raises(ToolError) as refused:
                await McpConnection(server, connect_timeout_seconds=5).open()
            assert str(refused.value) == (
                f"cannot connect to MCP server 'local-tools': {host} is not an address this mesh may reach "
                "(an operator may allow it with AGENTMESH_EGRESS_ALLOW)"
            )


async def test_a_stdio_server_that_dies_as_it_starts_is_started_once_more(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    connection = await McpConnection(stdio_server(STARTS_FILE=str(starts), EXIT_STARTS="1")).open()
    try:
        await exercise(connection)
    finally:
        await connection.aclose()
    assert starts.read_text().splitlines() == ["start", "start"]


async def test_a_stdio_server_that_always_dies_as_it_starts_is_a_clear_error(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    server = stdio_server(STARTS_FILE=str(starts), EXIT_STARTS="100")
    with pytest.raises(ToolError, match=r"cannot connect to MCP server 'test-tools'.*Connection closed"):
        await McpConnection(server, connect_timeout_seconds=20).open()
    # Started twice, not for ever.
    assert starts.read_text().splitlines() == ["start", "start"]


async def test_an_unreachable_server_is_a_clear_error() -> None:
    server = resources_pb2.McpServer(name="gone", transport="streamable_http", url="http://127.0.0.1:9/mcp")
    with pytest.raises(ToolError, match="cannot connect to MCP server 'gone'"):
        await McpConnection(server, connect_timeout_seconds=5, egress=LOOPBACK_ALLOWED).open()
    missing = resources_pb2.McpServer(name="missing", transport="stdio", command="/no/such/program")
    with pytest.raises(ToolError, match="missing"):
        await McpConnection(missing, connect_timeout_seconds=5).open()
