"""The mesh as separate processes on PostgreSQL for fault tests: registry, memory, two executors
and a gateway, with short leases (`LEASE_SECONDS`) so a death is noticed within seconds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.e2e.harness import ServiceProcess, free_loopback_ports
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD

LEASE_SECONDS = 2.0


class Processes:
    """The mesh as processes: registry, memory, two executors (by executor id), gateway."""

    def __init__(
        self, database_url: str, log_dir: Path, *, executor_env: dict[str, str] | None = None
    ) -> None:
        registry, memory, gateway, http, *executors = free_loopback_ports(6)
        self.executor_addresses = [f"127.0.0.1:{port}" for port in executors]
        common = {
            "AGENTMESH_JWT_SECRET": JWT_SECRET,
            "AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{registry}",
            "AGENTMESH_MEMORY_ADDRESS": f"127.0.0.1:{memory}",
            "AGENTMESH_DATABASE_URL": database_url,
        }
        pool = json.dumps(self.executor_addresses)

        def serve(service: str, name: str, env: dict[str, str]) -> ServiceProcess:
            return ServiceProcess.serve(service, name=name, env={**common, **env}, log_dir=log_dir)

        self._serve = serve
        self._pool = pool

        self.registry = serve(
            "registry",
            "registry",
            {
                "AGENTMESH_REGISTRY_PORT": str(registry),
                "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
                "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
                "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
                "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
                "AGENTMESH_REGISTRY_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
                "AGENTMESH_REGISTRY_RUN_LEASE_SWEEP_SECONDS": "0.2",
            },
        )
        self.memory = serve("memory", "memory", {"AGENTMESH_MEMORY_PORT": str(memory)})
        self.executors = {
            f"executor-{n}": serve(
                "executor",
                f"executor-{n}",
                {
                    "AGENTMESH_EXECUTOR_PORT": str(port),
                    "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": f"127.0.0.1:{port}",
                    "AGENTMESH_EXECUTOR_EXECUTOR_ID": f"executor-{n}",
                    "AGENTMESH_EXECUTOR_EXECUTOR_ADDRESSES": pool,
                    "AGENTMESH_EXECUTOR_EXECUTOR_HEALTH_INTERVAL_SECONDS": "0.2",
                    "AGENTMESH_EXECUTOR_LEASE_RENEW_INTERVAL_SECONDS": "0.5",
                    **(executor_env or {}),
                },
            )
            for n, port in enumerate(executors)
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
        await asyncio.gather(*(executor.start() for executor in self.executors.values()))
        await self.gateway.start()

    async def stop(self) -> None:
        for process in (*self.extra, self.gateway, *self.executors.values(), self.memory, self.registry):
            await process.stop()


@pytest_asyncio.fixture
async def processes(postgres_database: str, tmp_path: Path) -> AsyncIterator[Processes]:
    mesh = Processes(postgres_database, tmp_path)
    try:
        await mesh.start()
        yield mesh
    finally:
        await mesh.stop()
