"""An MCP server for the fault tests, served over stdio: every call of its tools appends a line to
the file `COUNT_FILE` names, so the test counts how often each really ran. `record` is not
idempotent (a resumed run must never run it twice); `lookup` declares `idempotentHint`.

With `HOLD_FILE` set, it notes its start (`started <pid of the executor that spawned it>`) and
answers nothing until that file exists: the executor's run waits in setting its agent up for as
long as the test wants."""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("agentmesh-counting-tools")


def _count(line: str) -> None:
    with open(os.environ["COUNT_FILE"], "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


@server.tool(annotations=ToolAnnotations(idempotent_hint=False))
def record(note: str) -> str:
    """Records a note (a side effect: not idempotent). Takes a moment, so kills land inside it."""
    _count(f"record {note}")
    time.sleep(0.05)
    return f"recorded {note}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def lookup(key: str) -> str:
    """Looks a key up (idempotent)."""
    _count(f"lookup {key}")
    return f"value of {key}"


def _hold() -> None:
    hold = os.environ.get("HOLD_FILE")
    if hold:
        _count(f"started {os.getppid()}")
        while not os.path.exists(hold):
            time.sleep(0.05)


if __name__ == "__main__":
    _hold()
    server.run("stdio")
