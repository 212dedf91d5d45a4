"""A gateway's schedule firer through a registry outage: it reaches the registry through a loopback
relay the test cuts and restores; the outage is one WARNING without a traceback (not one ERROR per
poll), and its end one INFO."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.conftest import start_gateway
from tests.polling import eventually

FIRER = "agentmesh.gateway.schedules"


class Relay:
    """A TCP relay on loopback to `target` that can be cut (its connections closed, new ones
    refused) and restored on the same port."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self.port = 0

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        pipes = [
            asyncio.create_task(_pipe(reader, upstream_writer)),
            asyncio.create_task(_pipe(upstream_reader, writer)),
        ]
        self._pipes.update(pipes)
        try:
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            self._pipes.difference_update(pipes)
            for stream in (writer, upstream_writer):
                stream.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


async def test_a_registry_outage_is_one_warning_and_its_end_one_info(
    mesh: Mesh, once: None, caplog: pytest.LogCaptureFixture
) -> None:
    relay = Relay(mesh.services["registry"].address)
    await relay.open()
    gateway = await start_gateway(
        mesh, registry_address=f"127.0.0.1:{relay.port}", schedule_poll_seconds=0.05
    )
    caplog.set_level(logging.INFO, logger=FIRER)

    def firer_records() -> list[logging.LogRecord]:
        return [record for record in caplog.records if record.name == FIRER]

    try:
        await relay.cut()

        async def warned() -> bool:
            return any(record.levelno == logging.WARNING for record in firer_records())

        await eventually(warned, what="the outage's warning")
        # Polls go on failing every 50 ms meanwhile; wait for a dozen of them to be sure.
        polls = len(caplog.records)

        async def more_polls() -> bool:
            return len(caplog.records) > polls + 12

        await eventually(more_polls, what="more failed polls (their transport warnings)")
        await relay.open()

        async def recovered() -> bool:
            return any(record.levelno == logging.INFO for record in firer_records())

        await eventually(recovered, timeout=30, what="the recovery's info")
    finally:
        await gateway.stop()
        await relay.cut()
    records = firer_records()
    assert [record.levelname for record in records] == ["WARNING", "INFO"], records
    assert "registry cannot be reached" in records[0].getMessage()
    assert records[0].exc_info is None
