"""A small MCP server for tests: `python mcp_server.py` serves it over stdio; `server` can also be
served over streamable HTTP (see `serve_http`).

With `STARTS_FILE` set, each start appends a line to that file, and the first `EXIT_STARTS` starts
(0 unless set) exit at once without a word: a server that dies as it starts."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("agentmesh-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def whoami() -> str:
    """Says which process serves the tools (and the TEST_GREETING variable, if set)."""
    return f"pid {os.getpid()} {os.environ.get('TEST_GREETING', '')}".strip()


@server.tool()
async def wait(seconds: float) -> str:
    """Waits, then answers."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message (a deliberate tool error, which reaches the client)."""
    raise ToolError(message)


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one HTTP header of the request (empty over stdio or when it was not sent)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peek(key: str) -> str:
    """Reads a value (declared read-only: it runs without asking)."""
    return f"value of {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def erase(key: str) -> str:
    """Erases a value (declared destructive: a person approves it first)."""
    return f"erased {key}"


class Seats(BaseModel):
    seats: int


def _ask_seats(table: str) -> Elicit[Seats]:
    return Elicit(f"How many seats at {table}?", Seats)


@server.tool()
def reserve(table: str, seats: Annotated[Seats, Resolve(_ask_seats)]) -> str:
    """Reserves a table, asking the person how many seats (an elicitation: declined, the call fails)."""
    return f"reserved {table} for {seats.seats}"


def _exits_at_start() -> bool:
    starts = os.environ.get("STARTS_FILE")
    if not starts:
        return False
    with open(starts, "a+", encoding="utf-8") as file:
        file.write("start\n")
        file.seek(0)
        count = len(file.readlines())
    return count <= int(os.environ.get("EXIT_STARTS", "0"))


if __name__ == "__main__":
    if not _exits_at_start():
        server.run("stdio")
