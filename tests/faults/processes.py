"""The mesh as separate processes on PostgreSQL for fault tests: registry, memory, two executors
and a gateway, with short leases (`LEASE_SECONDS`) so a death is noticed within seconds."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest_asyncio

from agentmesh.registry.v1 import resources_pb2
from tests.e2e.harness import ServiceProcess
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, Seeded
from tests.ports import free_loopback_ports
from tests.postgres import libpq_dsn

LEASE_SECONDS = 2.0
DELEGATE = {
    "content": "",
    "tool_calls": [{"name": "delegate", "arguments": {"agent": "worker", "task": "work"}}],
}


class Processes:
    """The mesh as processes: registry, memory, two executors (by executor id), gateway.

    With `own_registry` (an executor id), that executor talks to a registry replica of its own
    (`registry_replica`, on the same database) and is the only one the gateway sends runs to, while
    the executors send delegated and sub-agent runs only to the others: a test can cut it off from
    the registry — stop the replica — while it and the rest go on (a run sent to an executor cut
    off from the registry would wait for its start there).

    With `metrics`, every process serves its Prometheus endpoint on a port of its own
    (`metrics_urls`, by process name)."""

    def __init__(
        self,
        database_url: str,
        log_dir: Path,
        *,
        executor_env: dict[str, str] | None = None,
        registry_env: dict[str, str] | None = None,
        own_registry: str = "",
        metrics: bool = False,
    ) -> None:
        registry, memory, gateway, http, replica, *executors = free_loopback_ports(7)
        self.executor_addresses = [f"127.0.0.1:{port}" for port in executors]
        common = {
            "AGENTMESH_JWT_SECRET": JWT_SECRET,
            "AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{registry}",
            "AGENTMESH_MEMORY_ADDRESS": f"127.0.0.1:{memory}",
            "AGENTMESH_DATABASE_URL": database_url,
        }
        ids = [f"executor-{n}" for n in range(len(executors))]
        gateway_pool = [self.executor_addresses[ids.index(own_registry)]] if own_registry else None
        pool = json.dumps([a for a in self.executor_addresses if a not in (gateway_pool or ())])
        self.database_url = database_url
        self.metrics_urls: dict[str, str] = {}

        def serve(service: str, name: str, env: dict[str, str]) -> ServiceProcess:
            if metrics:
                (port,) = free_loopback_ports(1)
                env = {**env, "AGENTMESH_METRICS_PORT": str(port)}
                self.metrics_urls[name] = f"http://127.0.0.1:{port}/metrics"
            return ServiceProcess.serve(service, name=name, env={**common, **env}, log_dir=log_dir)

        self._serve = serve
        self._pool = json.dumps(gateway_pool) if gateway_pool else pool
        self._only_executor = bool(gateway_pool)

        def registry_process(name: str, port: int) -> ServiceProcess:
            return serve(
                "registry",
                name,
                {
                    "AGENTMESH_REGISTRY_PORT": str(port),
                    "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
                    "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
                    "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
                    "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
                    "AGENTMESH_REGISTRY_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
                    "AGENTMESH_REGISTRY_RUN_LEASE_SWEEP_SECONDS": "0.2",
                    **(registry_env or {}),
                },
            )

        self.registry = registry_process("registry", registry)
        self.registry_replica = registry_process("registry-replica", replica) if own_registry else None
        self.memory = serve("memory", "memory", {"AGENTMESH_MEMORY_PORT": str(memory)})
        self.executors = {
            executor_id: serve(
                "executor",
                executor_id,
                {
                    "AGENTMESH_EXECUTOR_PORT": str(port),
                    "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": f"127.0.0.1:{port}",
                    "AGENTMESH_EXECUTOR_EXECUTOR_ID": executor_id,
                    "AGENTMESH_EXECUTOR_EXECUTOR_ADDRESSES": pool,
                    "AGENTMESH_EXECUTOR_EXECUTOR_HEALTH_INTERVAL_SECONDS": "0.2",
                    "AGENTMESH_EXECUTOR_LEASE_RENEW_INTERVAL_SECONDS": "0.5",
                    **({"AGENTMESH_EXECUTOR_EXECUTOR_DISCOVERY": "false"} if own_registry else {}),
                    **(executor_env or {}),
                    **(
                        {"AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{replica}"}
                        if executor_id == own_registry
                        else {}
                    ),
                },
            )
            for executor_id, port in zip(ids, executors, strict=True)
        }
        self.gateway = self.new_gateway("gateway", grpc_port=gateway, http_port=http)
        self.extra: list[ServiceProcess] = []

    def new_gateway(self, name: str, *, grpc_port: int = 0, http_port: int = 0) -> ServiceProcess:
        """A gateway process over the same services (not started); free ports unless given."""
        if not grpc_port:
            grpc_port, http_port = free_loopback_ports(2)
        return self._serve(
            "gateway",
            name,
            {
                "AGENTMESH_GATEWAY_PORT": str(grpc_port),
                "AGENTMESH_GATEWAY_HTTP_PORT": str(http_port),
                "AGENTMESH_GATEWAY_EXECUTOR_ADDRESSES": self._pool,
                "AGENTMESH_GATEWAY_EXECUTOR_HEALTH_INTERVAL_SECONDS": "0.2",
                **({"AGENTMESH_GATEWAY_EXECUTOR_DISCOVERY": "false"} if self._only_executor else {}),
            },
        )

    async def add_gateway(self, name: str) -> ServiceProcess:
        """Starts one more gateway process, stopped with the mesh."""
        gateway = self.new_gateway(name)
        self.extra.append(gateway)
        await gateway.start()
        return gateway

    async def start(self) -> None:
        await asyncio.gather(self.registry.start(), self.memory.start())
        if self.registry_replica is not None:  # after the first registry made the database
            await self.registry_replica.start()
        await asyncio.gather(*(executor.start() for executor in self.executors.values()))
        await self.gateway.start()

    @property
    def services(self) -> list[ServiceProcess]:
        """Every process of the mesh."""
        replica = [self.registry_replica] if self.registry_replica is not None else []
        return [self.registry, *replica, self.memory, *self.executors.values(), self.gateway, *self.extra]

    async def stop(self) -> None:
        replica = [self.registry_replica] if self.registry_replica is not None else []
        for process in (
            *self.extra,
            self.gateway,
            *self.executors.values(),
            self.memory,
            *replica,
            self.registry,
        ):
            await process.stop()


async def seed_delegating_pair(
    client: MeshClient,
    token: str,
    *,
    worker: Sequence[Any],
    coordinator: Sequence[Any] = (DELEGATE, "done"),
    coordinator_mcp_servers: Sequence[resources_pb2.McpServer] = (),
) -> tuple[Seeded, Seeded]:
    """A `worker` agent and a `coordinator` in its project that may delegate to it, with these
    scripted answers (by default the coordinator delegates once, then says "done") and, for the
    coordinator, these MCP servers."""
    seeded_worker = await client.seed_agent(token, name="worker", mock_responses=worker)
    seeded_coordinator = await client.seed_agent(
        token,
        name="coordinator",
        project=seeded_worker,
        network_access=["worker"],
        mock_responses=coordinator,
        mcp_servers=coordinator_mcp_servers,
    )
    return seeded_worker, seeded_coordinator


@dataclass(frozen=True)
class RunBookkeeping:
    """The registry's own record of runs, read from its database: what no API shows whole."""

    runs_in_flight: dict[str, int]  # agent id -> its counter
    working: list[str]  # ids of agents whose status is working
    agent_runs: list[tuple[str, str, bool]]  # (run id, executor id, orphaned): runs not finished
    waiting: list[str] = field(default_factory=list)  # ids of agents with a run waiting for a person

    @property
    def settled(self) -> bool:
        """No run left behind: nothing in flight or waiting, nobody working, no lease row."""
        return (
            not any(self.runs_in_flight.values())
            and not self.working
            and not self.agent_runs
            and not self.waiting
        )


async def run_bookkeeping(database_url: str) -> RunBookkeeping:
    """The registry's run bookkeeping as its PostgreSQL database holds it now."""
    connection = await asyncpg.connect(libpq_dsn(database_url))
    try:
        agents = await connection.fetch("SELECT id, status, runs_in_flight, runs_waiting FROM agents")
        runs = await connection.fetch("SELECT run_id, executor_id, orphaned FROM agent_runs")
    finally:
        await connection.close()
    return RunBookkeeping(
        runs_in_flight={row["id"]: row["runs_in_flight"] for row in agents},
        working=[row["id"] for row in agents if row["status"] == "working"],
        agent_runs=[(row["run_id"], row["executor_id"], row["orphaned"]) for row in runs],
        waiting=[row["id"] for row in agents if row["status"] == "waiting" or row["runs_waiting"]],
    )


async def session_turns(database_url: str, project_id: str, session_id: str) -> set[str]:
    """The run ids of the session's turns the registry holds now (taken, and not yet swept)."""
    connection = await asyncpg.connect(libpq_dsn(database_url))
    try:
        rows = await connection.fetch(
            "SELECT run_id FROM session_turns WHERE session_id = $1", f"{project_id}/{session_id}"
        )
    finally:
        await connection.close()
    return {row["run_id"] for row in rows}


async def session_log(http: httpx.AsyncClient, project_id: str, session_id: str) -> list[dict[str, Any]]:
    """A session's recorded events over the gateway's REST API (empty when there is no session yet).
    Any other failure to read raises: a check must never take an unreadable log for an empty one;
    a refusal for the project's request rate is waited out."""
    path = f"/api/v1/projects/{project_id}/sessions/{session_id}/events"
    response = await http.get(path, params={"page_size": 1000})
    while response.status_code == 429:  # the project's request rate: wait as told, as clients do
        await asyncio.sleep(float(response.headers.get("Retry-After") or 1))
        response = await http.get(path, params={"page_size": 1000})
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return response.json()["events"]


@contextlib.asynccontextmanager
async def running(
    database_url: str,
    log_dir: Path,
    *,
    registry_env: dict[str, str] | None = None,
    own_registry: str = "",
    **executor_env: str,
) -> AsyncIterator[Processes]:
    """The mesh's processes, started, with these executor (and registry) settings; stopped after."""
    mesh = Processes(
        database_url, log_dir, executor_env=executor_env, registry_env=registry_env, own_registry=own_registry
    )
    try:
        await mesh.start()
        yield mesh
    finally:
        await mesh.stop()


@pytest_asyncio.fixture
async def processes(postgres_database: str, tmp_path: Path) -> AsyncIterator[Processes]:
    async with running(postgres_database, tmp_path) as mesh:
        yield mesh
