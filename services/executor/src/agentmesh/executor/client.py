"""The executor's client: the only module of the executor that other services import."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.errors import ExecutorBusy
from agentmesh.executor.v1 import executor_service_pb2 as pb
from agentmesh.executor.v1 import executor_service_pb2_grpc as pb_grpc
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.client import Metadata, stream, unary

# The executor's errors its callers act on (a busy executor: try another).
__all__ = ["ExecutorBusy", "ExecutorClient", "ExecutorPool"]


class ExecutorClient:
    """Typed calls to one executor; failures raise the DomainError it raised."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.ExecutorServiceStub(channel)

    async def run(
        self, request: pb.RunRequest, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> AsyncIterator[run_pb2.RunEvent]:
        async for response in stream(self.stub.Run, request, timeout=timeout, metadata=metadata):
            yield response.event

    async def get_stats(self, *, metadata: Metadata | None = None) -> pb.GetStatsResponse:
        return await unary(self.stub.GetStats, pb.GetStatsRequest(), metadata=metadata)

    async def end_session(self, session_id: str, *, metadata: Metadata | None = None) -> int:
        """Tears down what the executor caches for a session; how many agents it released."""
        request = pb.EndSessionRequest(session_id=session_id)
        return (await unary(self.stub.EndSession, request, metadata=metadata)).released_agents

    async def cancel_runs(
        self, project_id: str, agent_id: str, *, reason: str = "", metadata: Metadata | None = None
    ) -> int:
        """Cancels the agent's runs in flight on this executor; how many it cancelled."""
        request = pb.CancelRunsRequest(project_id=project_id, agent_id=agent_id, reason=reason)
        return (await unary(self.stub.CancelRuns, request, metadata=metadata)).cancelled_runs


class ExecutorPool:
    """The executors a caller may send runs to, with session affinity and failover.

    A session always maps to the same executor while it is healthy (rendezvous hashing over the
    healthy members), so its agent cache hits; when that executor is down or draining, runs go
    to the next one in the session's order. Used by gateways and, for delegation, by executors.
    """

    def __init__(
        self, addresses: list[str] | None = None, *, max_message_bytes: int = 4 * 1024 * 1024
    ) -> None:
        self._max_message_bytes = max_message_bytes
        self._clients: dict[str, ExecutorClient] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._unhealthy: set[str] = set()
        for address in addresses or []:
            self.add(address)

    @property
    def addresses(self) -> list[str]:
        return sorted(self._clients)

    def add(self, address: str) -> None:
        if address not in self._clients:
            channel = create_channel(address, max_message_bytes=self._max_message_bytes)
            self._channels[address] = channel
            self._clients[address] = ExecutorClient(channel)

    def clients(self) -> list[tuple[str, ExecutorClient]]:
        """Every executor of the pool, healthy or not, by address."""
        return sorted(self._clients.items())

    def mark(self, address: str, *, healthy: bool) -> None:
        (self._unhealthy.discard if healthy else self._unhealthy.add)(address)

    def candidates(self, session_id: str) -> list[tuple[str, ExecutorClient]]:
        """Executors in the order a session should try them: healthy first, by rendezvous hash."""
        ranked = sorted(self._clients, key=lambda a: _rendezvous(session_id, a), reverse=True)
        ranked.sort(key=lambda a: a in self._unhealthy)
        return [(address, self._clients[address]) for address in ranked]

    async def check_health(self, timeout: float = 1.0) -> None:
        """Asks every executor's health service and marks it healthy or not."""

        async def check(address: str) -> None:
            stub = health_pb2_grpc.HealthStub(self._channels[address])
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
                self.mark(address, healthy=reply.status == health_pb2.HealthCheckResponse.SERVING)
            except grpc.aio.AioRpcError:
                self.mark(address, healthy=False)

        await asyncio.gather(*(check(address) for address in list(self._channels)))

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


def _rendezvous(session_id: str, address: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{session_id}|{address}".encode(), digest_size=8).digest(), "big")
