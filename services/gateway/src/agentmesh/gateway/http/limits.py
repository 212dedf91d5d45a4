"""Request size limit for the HTTP face, as plain ASGI middleware.

The body is read up front, at most `max_bytes` of it, before any route runs: a request that
declares or sends more gets 413 and nothing behind it sees a byte. Bodies are small (JSON), so
holding one in memory costs nothing the route would not spend anyway. Once the body is replayed,
`receive` passes through, so routes still hear the client disconnect.

The rest of a refused body is read and dropped (up to a bound) before answering: closing a socket
with unread data resets the connection, and the client would see a reset instead of the 413.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentmesh.gateway.errors import RequestTooLarge
from agentmesh.gateway.http.errors import error_response

# How much of a refused body is drained before giving up on the connection.
_DRAIN_BYTES = 8 * 1024 * 1024


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self._app = app
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._max_bytes:
            await self._refuse(scope, receive, send, more=True)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        first: Message | None = None
        while more:
            message = await receive()
            if message["type"] != "http.request":
                first = message  # the client went away while sending: let the app see it
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max_bytes:
                await self._refuse(scope, receive, send, more=message.get("more_body", False))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        replay: list[Message] = [first] if first else [{"type": "http.request", "body": b"".join(chunks)}]

        async def replaying_receive() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        await self._app(scope, replaying_receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, more: bool) -> None:
        drained = 0
        while more and drained <= _DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            drained += len(message.get("body", b""))
            more = message.get("more_body", False)
        response = error_response(scope["path"], RequestTooLarge(self._max_bytes))
        if more:
            response.headers["Connection"] = "close"  # too much to drain: drop the connection
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
