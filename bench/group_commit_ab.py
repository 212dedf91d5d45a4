"""`python -m bench.group_commit_ab`: the A/B of the memory service's group commit. Two
memory service processes on one PostgreSQL server, one with group commit and one without, each
taking 16 writers appending one ~300-byte event per call to 16 sessions; 3-second bursts,
alternated, four each. Prints appends/s per burst and the medians."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from tests.bearer import authorized_channel
from tests.e2e.harness import ServiceProcess
from tests.mesh import JWT_SECRET
from tests.postgres import fresh_database, postgres_server_url

WRITERS = 16
ROUNDS = 4
BURST_SECONDS = 3.0
EVENT = memory_service_pb2.NewEvent(
    agent="bench", event_type=resources_pb2.EVENT_TYPE_AGENT_RESPONSE, content="x" * 300
)


async def burst(memory: MemoryClient, sessions: list[str], seconds: float) -> float:
    """Appends/s of one writer per session for `seconds`."""
    stop = time.monotonic() + seconds
    count = 0

    async def writer(session_id: str) -> None:
        nonlocal count
        while time.monotonic() < stop:
            await memory.append_events(session_id, "p-1", [EVENT], receipts_only=True)
            count += 1

    started = time.monotonic()
    await asyncio.gather(*(writer(session_id) for session_id in sessions))
    return count / (time.monotonic() - started)


async def main(log_dir: Path) -> None:
    with postgres_server_url() as server:
        async with fresh_database(server) as grouped_url, fresh_database(server) as alone_url:
            processes = {
                name: ServiceProcess.serve(
                    "memory",
                    env={
                        "AGENTMESH_JWT_SECRET": JWT_SECRET,
                        "AGENTMESH_DATABASE_URL": url,
                        "AGENTMESH_MEMORY_PORT": "0",
                        "AGENTMESH_MEMORY_GROUP_COMMIT": group_commit,
                    },
                    log_dir=log_dir,
                    name=f"memory-{name}",
                )
                for name, url, group_commit in (
                    ("grouped", grouped_url, "true"),
                    ("alone", alone_url, "false"),
                )
            }
            for process in processes.values():
                await process.start(timeout=60)
            try:
                clients = {
                    name: MemoryClient(authorized_channel(p.grpc_address)) for name, p in processes.items()
                }
                sessions = {name: [uuid.uuid4().hex for _ in range(WRITERS)] for name in processes}
                for name in processes:  # warm up; creates the sessions
                    await burst(clients[name], sessions[name], 1.0)
                rates: dict[str, list[float]] = {name: [] for name in processes}
                for round_ in range(ROUNDS):
                    for name in ("grouped", "alone") if round_ % 2 == 0 else ("alone", "grouped"):
                        rates[name].append(await burst(clients[name], sessions[name], BURST_SECONDS))
                        print(f"{name:8} {rates[name][-1]:8.1f} appends/s", flush=True)
                for name, values in rates.items():
                    print(f"{name:8} median {statistics.median(values):.1f} appends/s")
            finally:
                for process in processes.values():
                    await process.stop()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="agentmesh-group-commit-ab-") as scratch:
        asyncio.run(main(Path(scratch)))
