"""`python -m bench.fence_ab [--sqlite]`: what the run fence costs an append
(docs/durability.md, "Fencing a run's steps after its end"). One memory service process on
PostgreSQL (or SQLite), the same ~300-byte event appended per call either as a step of a run
(`run_id` and a key: the append is fenced — the store checks the run's end atomically with the
write) or with no run (not fenced). One writer (latency: p50 of a call) and sixteen writers on
sixteen sessions (appends/s, with PostgreSQL's group commit); 3-second bursts, A and B alternated,
four each. Prints every burst and the medians."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from tests.bearer import authorized_channel
from tests.e2e.harness import ServiceProcess
from tests.mesh import JWT_SECRET
from tests.postgres import fresh_database, postgres_server_url

ROUNDS = 4
BURST_SECONDS = 3.0
WRITERS = 16


def _event(fenced: bool, run_id: str, n: int) -> memory_service_pb2.NewEvent:
    event = memory_service_pb2.NewEvent(
        agent="bench", event_type=resources_pb2.EVENT_TYPE_TOOL_CALL, content="x" * 300
    )
    if fenced:
        event.run_id = run_id
        event.idempotency_key = f"{run_id}:{n}"
    return event


async def burst(memory: MemoryClient, sessions: list[str], *, fenced: bool) -> tuple[float, float]:
    """(appends/s, p50 seconds of a call) of one writer per session for BURST_SECONDS."""
    stop = time.monotonic() + BURST_SECONDS
    latencies: list[float] = []

    async def writer(session_id: str) -> None:
        run_id = uuid.uuid4().hex
        n = 0
        while time.monotonic() < stop:
            n += 1
            started = time.perf_counter()
            await memory.append_events(session_id, "p-1", [_event(fenced, run_id, n)], receipts_only=True)
            latencies.append(time.perf_counter() - started)

    started = time.monotonic()
    await asyncio.gather(*(writer(session_id) for session_id in sessions))
    return len(latencies) / (time.monotonic() - started), statistics.median(latencies)


@asynccontextmanager
async def database(sqlite: bool, scratch: Path) -> AsyncIterator[str]:
    if sqlite:
        yield f"sqlite+aiosqlite:///{scratch / 'memory.db'}"
        return
    with postgres_server_url() as server:
        async with fresh_database(server) as url:
            yield url


async def main(sqlite: bool, scratch: Path) -> None:
    async with database(sqlite, scratch) as url:
        process = ServiceProcess.serve(
            "memory",
            env={
                "AGENTMESH_JWT_SECRET": JWT_SECRET,
                "AGENTMESH_DATABASE_URL": url,
                "AGENTMESH_MEMORY_PORT": "0",
            },
            log_dir=scratch,
            name="memory",
        )
        await process.start(timeout=60)
        try:
            memory = MemoryClient(authorized_channel(process.grpc_address))
            for writers in (1, WRITERS):
                sessions = {arm: [uuid.uuid4().hex for _ in range(writers)] for arm in ("fenced", "unfenced")}
                for arm in sessions:  # warm up; creates the sessions
                    await burst(memory, sessions[arm], fenced=arm == "fenced")
                figures: dict[str, list[tuple[float, float]]] = {"fenced": [], "unfenced": []}
                for round_ in range(ROUNDS):
                    for arm in ("fenced", "unfenced") if round_ % 2 == 0 else ("unfenced", "fenced"):
                        figures[arm].append(await burst(memory, sessions[arm], fenced=arm == "fenced"))
                        rate, p50 = figures[arm][-1]
                        print(f"{writers:2} writers {arm:9} {rate:8.1f} appends/s  p50 {p50 * 1000:6.2f} ms")
                for arm, values in figures.items():
                    rate = statistics.median(rate for rate, _ in values)
                    p50 = statistics.median(p50 for _, p50 in values)
                    print(
                        f"{writers:2} writers {arm:9} median {rate:8.1f} appends/s  p50 {p50 * 1000:6.2f} ms"
                    )
        finally:
            await process.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sqlite", action="store_true", help="on SQLite instead of PostgreSQL")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentmesh-fence-ab-") as scratch:
        asyncio.run(main(arguments.sqlite, Path(scratch)))
