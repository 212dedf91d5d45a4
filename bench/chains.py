"""The raw baselines the bench compares the mesh with, each process its own OS process on
loopback (`bench.echo`): the raw gRPC chain (an echo server and two proxies) and the floor of a
chat in this design (relay, durable, insert)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from bench import echo
from bench.rawdb import create_raw_table, event_json
from bench.report import REPO
from tests.e2e.harness import ServiceProcess

PAYLOAD = b"x" * 100  # the raw echo's message


@contextlib.asynccontextmanager
async def echo_processes(
    log_dir: Path, links: list[tuple[str, list[str]]]
) -> AsyncIterator[list[ServiceProcess]]:
    """`bench.echo` processes (name, role and its arguments), started in order, each after the
    first forwarding to the one started before it; stopped in reverse order."""
    processes: list[ServiceProcess] = []
    try:
        for name, role in links:
            upstream = ["--upstream", processes[-1].grpc_address] if processes else []
            process = ServiceProcess(
                name,
                [sys.executable, "-m", "bench.echo", *role, *upstream],
                env={},
                log_dir=log_dir,
                cwd=REPO,
            )
            processes.append(await process.start(timeout=30))
        yield processes
    finally:
        for process in reversed(processes):
            await process.stop()


def _pids(processes: list[ServiceProcess]) -> dict[str, list[int]]:
    return {process.name: [process.pid] for process in processes if process.pid is not None}


class RawChain:
    """The raw echo server and two proxies in front of it, each its own process: `unary` calls
    the echo directly (one hop), `chain` goes client → proxy → proxy → echo (three hops, as a chat
    goes client → gateway → executor → registry/memory)."""

    def __init__(self, processes: list[ServiceProcess]) -> None:
        self._processes = processes
        server, _, front = processes
        self._channels = [
            grpc.aio.insecure_channel(server.grpc_address),
            grpc.aio.insecure_channel(front.grpc_address),
        ]
        self._channels.append(grpc.aio.insecure_channel(processes[1].grpc_address))
        self._unary = echo.echo_call(self._channels[0])
        self._chain = echo.echo_call(self._channels[1])
        self._two_hops = echo.echo_call(self._channels[2])

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, log_dir: Path):
        links = [("echo-server", ["server"]), ("echo-proxy-2", ["proxy"]), ("echo-proxy-1", ["proxy"])]
        async with echo_processes(log_dir, links) as processes:
            chain = cls(processes)
            try:
                yield chain
            finally:
                for channel in chain._channels:
                    await channel.close()

    def pids(self) -> dict[str, list[int]]:
        return _pids(self._processes)

    async def unary(self) -> None:
        await self._unary(PAYLOAD, timeout=10)

    async def chain(self) -> None:
        await self._chain(PAYLOAD, timeout=10)

    async def two_hops(self) -> None:
        """client -> proxy -> echo."""
        await self._two_hops(PAYLOAD, timeout=10)


class FloorChain:
    """The floor of a one-step chat in this design (`bench.echo`'s `relay` and `durable`): client →
    relay → durable → insert → PostgreSQL, each its own process, plain `grpc.aio` and asyncpg. It
    makes the messages the contract needs on a chat's critical path and nothing else — the
    stream's request and two messages, relayed once; two sequential recorded appends (the input
    before the run is said to start, the answer before it is sent) — with no auth, no protobuf,
    no registry, no bookkeeping. What a chat costs above it is agentmesh's own work."""

    def __init__(self, processes: list[ServiceProcess], content: bytes) -> None:
        self._processes = processes
        self._channel = grpc.aio.insecure_channel(processes[-1].grpc_address)
        self._call = echo.stream_call(self._channel)
        self._content = content
        # Seconds from the request to the first message, as first_token_ratio's: a chat's text
        # streams once its input is recorded, before its answer is.
        self.first_message_seconds: list[float] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, log_dir: Path, dsn: str):
        await create_raw_table(dsn)
        links = [
            ("floor-insert", ["insert", "--dsn", dsn]),
            ("floor-durable", ["durable"]),
            ("floor-relay", ["relay"]),
        ]
        async with echo_processes(log_dir, links) as processes:
            floor = cls(processes, event_json().encode())
            try:
                yield floor
            finally:
                await floor._channel.close()

    def pids(self) -> dict[str, list[int]]:
        return _pids(self._processes)

    async def __call__(self) -> None:
        started = time.perf_counter()
        messages = 0
        async for _ in self._call(self._content, timeout=10):
            messages += 1
            if messages == 1:  # after the input's append, as a chat's first text delta
                self.first_message_seconds.append(time.perf_counter() - started)
        if messages != 2:
            raise RuntimeError(f"the floor chain answered {messages} messages, not 2")
