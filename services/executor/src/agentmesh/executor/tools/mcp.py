"""MCP servers as tool sources, through the `mcp` SDK, over stdio or streamable HTTP.

Each connection is owned by a task of its own: the SDK's client is an anyio context whose cancel
scopes must be left by the task that entered them, while its tools are called from whichever run
uses them and the connection is closed by whoever evicts it. The owner task enters the client,
lists the tools, then waits to be told to close.

The revision is negotiated as the SDK does by default: a `server/discover` probe at 2026-07-28
(stateless: every request carries its version in `_meta`), and the `initialize` handshake of the
older revisions when the server does not answer it as a 2026-07-28 server. A call that asks a
person for input is handled by revision in `mcp_questions.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentmesh.executor.providers.base import ToolSpec
from agentmesh.executor.tools import mcp_questions
from agentmesh.executor.tools.base import ToolAnswer, ToolError, ToolOutput
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.egress import EgressPolicy, EgressRefused
from agentmesh.runtime.egress_http import pinned_transport

if TYPE_CHECKING:  # the SDK is imported where a server is connected: it is slow to import
    import mcp

logger = logging.getLogger(__name__)

STDIO = "stdio"
STREAMABLE_HTTP = "streamable_http"
_MAX_TOOL_PAGES = 100
# A server whose connection closes before it answered (a stdio process that exited as it
# started) is started once more, within the same connect timeout: seen on a loaded host, where a
# first start sometimes died without a word and the run went on without its tools.
_START_ATTEMPTS = 2
# A 2026-07-28 server that answers `input_required` with only its state (no question: it is not
# done yet) is asked again after a short pause, this many times at most (the SDK's own driver
# allows as many rounds, pausing 50 ms doubling to 250 ms).
_STATE_ONLY_ROUNDS = 10
_STATE_ONLY_PAUSE_SECONDS = 0.05


def server_signature(server: resources_pb2.McpServer) -> str:
    """A stable digest of everything that identifies an MCP server's connection."""
    payload = {
        "transport": server.transport,
        "command": server.command,
        "args": list(server.args),
        "url": server.url,
        "env": dict(sorted(server.env.items())),
        "headers": dict(sorted(server.headers.items())),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class _HttpTarget:
    """A streamable HTTP endpoint and the headers every request to it carries."""

    url: str
    headers: dict[str, str] = field(repr=False)


def _target(server: resources_pb2.McpServer) -> mcp.StdioServerParameters | _HttpTarget:
    transport = server.transport.lower().replace("-", "_")
    if transport == STDIO:
        if not server.command:
            raise ValueError(f"MCP server {server.name!r}: stdio needs a command")
        import mcp
        from mcp.client.stdio import get_default_environment

        env = {**get_default_environment(), **dict(server.env)} if server.env else None
        return mcp.StdioServerParameters(command=server.command, args=list(server.args), env=env)
    if transport in (STREAMABLE_HTTP, "http"):
        if not server.url:
            raise ValueError(f"MCP server {server.name!r}: streamable_http needs a url")
        return _HttpTarget(server.url, dict(server.headers))
    raise ValueError(f"MCP server {server.name!r}: unknown transport {server.transport!r}")


class McpConnection:
    """One open MCP server connection and the tools it offers."""

    def __init__(
        self,
        server: resources_pb2.McpServer,
        *,
        connect_timeout_seconds: float = 30.0,
        scrub: Callable[[str], str] = str,
        egress: EgressPolicy | None = None,
    ) -> None:
        self.name = server.name
        # A streamable HTTP server is a URL a tenant gave: reached only as the egress policy allows.
        self._egress = egress or EgressPolicy()
        # Its errors and log lines may quote what it was given (a URL, a header): scrubbed.
        self._scrub = scrub
        self._target = _target(server)
        self._connect_timeout_seconds = connect_timeout_seconds
        self._client: mcp.Client | None = None
        # The MCP revision negotiated with the server ("" until connected).
        self.protocol_version = ""
        self._tools: list[McpTool] = []
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    @property
    def tools(self) -> list[McpTool]:
        return list(self._tools)

    @property
    def alive(self) -> bool:
        return self._client is not None and self._task is not None and not self._task.done()

    async def open(self) -> McpConnection:
        """Connects and lists the tools; raises when the server cannot be reached in time."""
        # The SDK takes seconds to import on a busy machine: in a thread, so the event loop goes
        # on meanwhile (a loop blocked that long misses its lease renewals, and its runs are
        # taken over — found by the executor-kill test with a 2 s lease).
        await asyncio.to_thread(_import_sdk)
        deadline = asyncio.get_running_loop().time() + self._connect_timeout_seconds
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._error = None
            # A context of its own: the connection outlives the run that opened it, and must not
            # keep that run's trace, token or deadline.
            self._task = asyncio.create_task(
                self._own(), name=f"mcp {self.name}", context=contextvars.Context()
            )
            ready = asyncio.ensure_future(self._ready.wait())
            try:
                async with asyncio.timeout_at(deadline):
                    await asyncio.wait([self._task, ready], return_when=asyncio.FIRST_COMPLETED)
            except TimeoutError:
                await self.aclose()
                raise ToolError(
                    f"MCP server {self.name!r} did not answer within {self._connect_timeout_seconds:g}s"
                ) from None
            except asyncio.CancelledError:
                await self.aclose()
                raise
            finally:
                ready.cancel()  # not left pending when the connection ended first
            if self._ready.is_set():
                return self
            if attempt < _START_ATTEMPTS and _closed_at_start(self._error):
                logger.warning(
                    "MCP server %r closed its connection as it started (%s): starting it again",
                    self.name,
                    self._scrub(_describe(self._error)) if self._error else "",
                )
                continue
            break
        error = self._error or RuntimeError("connection closed")
        raise ToolError(
            self._scrub(f"cannot connect to MCP server {self.name!r}: {_describe(error)}")
        ) from None

    async def _own(self) -> None:
        import mcp

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    mcp.Client(
                        await self._transport(stack),
                        cache=None,
                        # Declares elicitation; answered by revision (mcp_questions.py).
                        elicitation_callback=mcp_questions.refuse_live,
                    )
                )
                self._client = client
                self.protocol_version = client.protocol_version
                logger.info("MCP server %r speaks protocol revision %s", self.name, self.protocol_version)
                self._tools = [McpTool(self, tool) for tool in await _list_tools(client)]
                self._ready.set()
                await self._closing.wait()
        except Exception as error:
            self._error = error
            if self._ready.is_set():
                logger.warning("MCP server %r connection ended: %s", self.name, self._scrub(_describe(error)))
        finally:
            self._client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """What `mcp.Client` connects through: stdio parameters, or a streamable HTTP transport
        on an HTTP client of its own that sends the server's headers and keeps to the egress policy
        (with the SDK's timeouts)."""
        target = self._target
        if not isinstance(target, _HttpTarget):
            return target
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=target.headers or None,
                timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                transport=pinned_transport(self._egress, httpx2),
            )
        )
        return streamable_http_client(target.url, http_client=http)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout_seconds: float | None = None,
        answer: ToolAnswer | None = None,
    ) -> ToolOutput:
        """Calls a tool — or, with `answer`, sends a call that asked a person again, carrying the
        response. A call the server cannot finish without a person is an output with a question."""
        import mcp
        from mcp_types import InputRequiredResult

        client = self._client
        if client is None:
            raise ToolError(f"MCP server {self.name!r} is not connected")
        responses, state = mcp_questions.responses(answer) if answer is not None else (None, None)
        try:
            for round_ in range(_STATE_ONLY_ROUNDS + 1):
                result = await client.session.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=timeout_seconds,
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                )
                if not isinstance(result, InputRequiredResult):
                    return ToolOutput(_result_text(result), is_error=bool(result.is_error))
                if result.input_requests:
                    return ToolOutput("", question=mcp_questions.question(self.name, name, result))
                await asyncio.sleep(_STATE_ONLY_PAUSE_SECONDS * (round_ + 1))
                responses, state = None, result.request_state
        except mcp.MCPError as error:
            raise ToolError(self._scrub(f"MCP server {self.name!r}: {error}")) from None
        raise ToolError(f"MCP server {self.name!r}: {name} was not done after {_STATE_ONLY_ROUNDS} rounds")

    async def aclose(self) -> None:
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


class McpTool:
    """One tool of an MCP server."""

    def __init__(self, connection: McpConnection, tool: mcp.Tool) -> None:
        self._connection = connection
        self.server = connection.name  # its permission's name is mcp:<server>:<tool>
        self.spec = ToolSpec(
            name=tool.name,
            description=tool.description or tool.title or tool.name,
            parameters=dict(tool.input_schema or {"type": "object"}),
        )
        # The server's word (MCP `annotations.idempotentHint`): a resumed run calls it again when
        # its result was never recorded; by default (no hint) it does not.
        annotations = getattr(tool, "annotations", None)
        self.idempotent = bool(annotations is not None and getattr(annotations, "idempotent_hint", False))
        # Read-only and destructive hints decide its permission when no rule does (permissions.py).
        self.annotations = annotations

    async def call(self, arguments: dict[str, Any], *, answer: ToolAnswer | None = None) -> ToolOutput:
        return await self._connection.call(self.spec.name, arguments, answer=answer)


def preload_sdk() -> asyncio.Task[None]:
    """Imports the SDK in a thread, in the background (the executor does at start): the first
    run that connects an MCP server then does not wait for it, nor starve the event loop."""
    return asyncio.create_task(asyncio.to_thread(_import_sdk), name="import the MCP SDK")


def _import_sdk() -> None:
    import mcp
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401


async def _list_tools(client: mcp.Client) -> list[mcp.Tool]:
    tools: list[mcp.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _result_text(result: Any) -> str:
    texts = [block.text for block in result.content or () if getattr(block, "type", "") == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    others = [getattr(block, "type", "content") for block in result.content or ()]
    return f"({', '.join(others)})" if others else ""


def _closed_at_start(error: BaseException | None) -> bool:
    """Whether a connection that never got ready ended because the server closed it (MCP's
    CONNECTION_CLOSED), rather than by refusing or failing the handshake."""
    import mcp
    from mcp.types import CONNECTION_CLOSED

    if isinstance(error, BaseExceptionGroup):
        return any(_closed_at_start(inner) for inner in error.exceptions)
    return isinstance(error, mcp.MCPError) and error.error.code == CONNECTION_CLOSED


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    if isinstance(error, EgressRefused):
        return str(error)
    return f"{type(error).__name__}: {error}"
