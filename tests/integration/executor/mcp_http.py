"""Serves the test MCP server over streamable HTTP on a free loopback port, in this process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from tests.integration.executor.mcp_server import server


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
