"""A TCP proxy on loopback in front of one server, that can hold the server's answers: a test's way
to make a call succeed on the server while its caller hears nothing (an answer lost or late, the
caller gives up — as on a loaded host), at a moment the caller's own bytes decide.

The proxy watches what clients send for a marker (a string the test put in a request: gRPC sends
protobuf fields as they are). From the marker's `hold_from`th sighting on, the server's bytes are
held (in order, on every connection) until its `hold_until`th sighting passed (the answers held
flow first), or `release`; `sightings` says how often it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class HoldingProxy:
    def __init__(
        self, target: Callable[[], str], marker: bytes, *, hold_from: int = 1, hold_until: int = 0
    ) -> None:
        self._target = target  # the server's host:port, looked up at each connection
        self._marker = marker
        self._hold_from = hold_from
        self._hold_until = hold_until  # 0: until `release`
        self.sightings = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        assert self._server is not None, "start the proxy first"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def __aenter__(self) -> HoldingProxy:
        self._server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        self.release()
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def holding(self) -> bool:
        return not self._flowing.is_set()

    def release(self) -> None:
        """Lets the server's answers flow again, those held first."""
        self._flowing.set()

    async def _connect(self, client: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        host, port = self._target().rsplit(":", 1)
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        tasks = {
            asyncio.ensure_future(self._requests(client, server_writer)),
            asyncio.ensure_future(self._answers(server_reader, client_writer)),
        }
        self._tasks |= tasks
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            self._tasks -= tasks
            for writer in (client_writer, server_writer):
                writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tail = b""  # the last bytes seen, so a marker split across reads is still found
        while chunk := await reader.read(65536):
            seen = tail + chunk  # the tail is shorter than the marker: no sighting counted twice
            self.sightings += seen.count(self._marker)
            tail = seen[-(len(self._marker) - 1) :] if len(self._marker) > 1 else b""
            if self._hold_from and self.sightings >= self._hold_from:
                self._hold_from = 0  # once
                self._flowing.clear()
            writer.write(chunk)
            await writer.drain()
            if self._hold_until and self.sightings >= self._hold_until:
                self._hold_until = 0
                self.release()

    async def _answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                await self._flowing.wait()
                writer.write(chunk)
                await writer.drain()
