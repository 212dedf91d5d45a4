"""Serves the test MCP server over streamable HTTP on a free loopback port, in this process; and
the reference `@modelcontextprotocol/server-everything` (installed by `make install` from
tests/mcp/package.json), a server nobody here wrote, over streamable HTTP as a process of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn

from tests.integration.executor.mcp_server import server
from tests.polling import eventually

EVERYTHING = (
    Path(__file__).parents[2] / "mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


@contextlib.asynccontextmanager
async def serve_http() -> AsyncIterator[str]:
    """The MCP endpoint's URL while the server runs."""
    app = server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = web.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        web.should_exit = True
        await task


@contextlib.asynccontextmanager
async def serve_everything_http() -> AsyncIterator[str]:
    """The reference server's MCP endpoint's URL while it runs."""
    with socket.socket() as probe:  # a free port (it takes its port from PORT, and says none)
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
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
