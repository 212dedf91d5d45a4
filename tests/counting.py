"""The counting MCP server (`tests/faults/counting_tools.py`) as an agent's MCP server, and how
often each of its tools really ran: what the durability tests count a tool's runs with."""

from __future__ import annotations

import sys
from pathlib import Path

from agentmesh.registry.v1 import resources_pb2

COUNTING_TOOLS = Path(__file__).parent / "faults" / "counting_tools.py"


def counting_server(count_file: Path, *, name: str = "counting", **env: str) -> resources_pb2.McpServer:
    """The server over stdio, counting its calls in `count_file` (`env`: HOLD_FILE, say)."""
    return resources_pb2.McpServer(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=[str(COUNTING_TOOLS)],
        env={"COUNT_FILE": str(count_file), **env},
    )


def calls(count_file: Path, tool: str) -> int:
    """How many times `tool` ran."""
    if not count_file.exists():
        return 0
    return sum(line.startswith(f"{tool} ") for line in count_file.read_text().splitlines())
