"""A whole mesh for the benchmarks: the four services as separate OS processes against one
PostgreSQL database, the agents the figures chat with, and the client calls they time.

Processes are started with `tests.e2e.harness.ServiceProcess` (the same harness the end-to-end
tests use), so a mesh here is the mesh a user runs, configured only through its environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc, resources_pb2
from agentmesh.runtime.identity import SYSTEM, TokenCodec
from agentmesh.runtime.service_identity import ServiceCredentials, credential_interceptors
from tests.e2e.harness import ServiceProcess
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, Seeded, bearer
from tests.ports import free_loopback_ports

SERVICES = ("registry", "memory", "executor", "gateway")
# Runs one executor may hold at once; 5,000 open streams go through one executor in
# `streams_5000`, so the default (256) is raised for every mesh of the run alike.
MAX_CONCURRENT_RUNS = 5100


class ChatFailed(RuntimeError):
    """A chat did not end with the addressed agent's run_completed."""


@dataclass
class Mesh:
    """Four service processes, started and stopped together, and a client channel to each face."""

    name: str
    processes: dict[str, ServiceProcess]
    _channels: list[grpc.aio.Channel] = field(default_factory=list)
    _http: httpx.AsyncClient | None = None

    @property
    def gateway_address(self) -> str:
        return self.processes["gateway"].grpc_address

    @property
    def memory_address(self) -> str:
        return self.processes["memory"].grpc_address

    def pid(self, service: str) -> int:
        pid = self.processes[service].pid
        if pid is None:
            raise RuntimeError(f"{self.name} {service} is not running")
        return pid

    def client(self) -> MeshClient:
        return MeshClient(self.processes["registry"].grpc_address, self.gateway_address)

    def channel(self, address: str) -> grpc.aio.Channel:
        """A new client channel (closed with the mesh): one TCP connection of its own. To memory's
        port, which answers the mesh's services only, it carries a service credential as theirs do."""
        interceptors = (
            credential_interceptors(ServiceCredentials(JWT_SECRET, service="bench"))
            if address == self.memory_address
            else None
        )
        channel = grpc.aio.insecure_channel(address, interceptors=interceptors)
        self._channels.append(channel)
        return channel

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            limits = httpx.Limits(max_connections=1100, max_keepalive_connections=1100)
            self._http = httpx.AsyncClient(
                base_url=self.processes["gateway"].http_url, timeout=60.0, limits=limits
            )
        return self._http

    async def stop(self) -> None:
        """Closes the client side and stops the services (again: a no-op)."""
        channels, self._channels = self._channels, []
        for channel in channels:
            await channel.close()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        # The edge first (nothing new comes in), then the executor, then the stores it used.
        await self.processes["gateway"].stop()
        await self.processes["executor"].stop()
        await asyncio.gather(self.processes["registry"].stop(), self.processes["memory"].stop())


async def start_mesh(
    name: str, *, database_url: str, log_dir: Path, extra_env: Mapping[str, str] = {}
) -> Mesh:
    """Starts registry and memory, then the executor, then the gateway (which dials it)."""
    registry, memory, executor, gateway, http = free_loopback_ports(5)
    common = {
        "AGENTMESH_JWT_SECRET": JWT_SECRET,
        "AGENTMESH_DATABASE_URL": database_url,
        "AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{registry}",
        "AGENTMESH_MEMORY_ADDRESS": f"127.0.0.1:{memory}",
        # BENCH_GC_FREEZE=0 measures without the startup heap frozen (runtime/heap.py's A/B).
        "AGENTMESH_GC_FREEZE": os.environ.get("BENCH_GC_FREEZE", "1"),
        **extra_env,
    }
    environments = {
        "registry": {
            "AGENTMESH_REGISTRY_PORT": str(registry),
            "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
            "AGENTMESH_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD,
            # Signing in is not what is measured.
            "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
            "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
        },
        "memory": {
            "AGENTMESH_MEMORY_PORT": str(memory),
            # BENCH_MEMORY_GROUP_COMMIT=false measures without group commit (its A/B).
            "AGENTMESH_MEMORY_GROUP_COMMIT": os.environ.get("BENCH_MEMORY_GROUP_COMMIT", "true"),
        },
        "executor": {
            "AGENTMESH_EXECUTOR_PORT": str(executor),
            "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": f"127.0.0.1:{executor}",
            "AGENTMESH_EXECUTOR_MAX_CONCURRENT_RUNS": str(MAX_CONCURRENT_RUNS),
            # For A/Bs: BENCH_AGENT_WATCH=false measures without the registry's pushed
            # changes, BENCH_FINISH_WINDOW_SECONDS with run ends batched over a longer window,
            # BENCH_MAX_CONCURRENT_STARTS with another cap on starts in flight.
            "AGENTMESH_EXECUTOR_AGENT_WATCH": os.environ.get("BENCH_AGENT_WATCH", "true"),
            "AGENTMESH_EXECUTOR_FINISH_BATCH_WINDOW_SECONDS": os.environ.get(
                "BENCH_FINISH_WINDOW_SECONDS", "0.02"
            ),
            "AGENTMESH_EXECUTOR_MAX_CONCURRENT_STARTS": os.environ.get("BENCH_MAX_CONCURRENT_STARTS", "32"),
        },
        "gateway": {
            "AGENTMESH_GATEWAY_PORT": str(gateway),
            "AGENTMESH_GATEWAY_HTTP_PORT": str(http),
            "AGENTMESH_GATEWAY_EXECUTOR_ADDRESSES": json.dumps([f"127.0.0.1:{executor}"]),
            # The benchmark is one user sending thousands of chats: the per-user limit is off.
            "AGENTMESH_GATEWAY_RATE_LIMIT_PER_SECOND": "0",
        },
    }
    mesh_dir = log_dir / name
    processes = {
        service: ServiceProcess.serve(
            service, env={**common, **environments[service]}, log_dir=mesh_dir, name=f"{name}-{service}"
        )
        for service in SERVICES
    }
    mesh = Mesh(name, processes)
    try:
        # Registry and memory call nobody; the executor registers with the registry; the gateway
        # starts last, so its first dial of the executor finds it serving.
        await asyncio.gather(processes["registry"].start(timeout=60), processes["memory"].start(timeout=60))
        await processes["executor"].start(timeout=60)
        await processes["gateway"].start(timeout=60)
        await processes["gateway"].wait_serving(timeout=30)
    except BaseException:
        await mesh.stop()
        raise
    return mesh


def delegate_response(to: str) -> dict[str, Any]:
    """A mock model answer that delegates to `to` (native function calling)."""
    return {"content": "", "tool_calls": [{"name": "delegate", "arguments": {"agent": to, "task": "do it"}}]}


async def seed_delegation_chain(
    client: MeshClient, token: str, *, depth: int, project: Seeded
) -> list[Seeded]:
    """Agents `hop0 -> hop1 -> ... -> hop{depth}`: each delegates to the next, the last answers.
    Chatting with `hop{depth - k}` runs a delegation k levels deep."""
    names = [f"hop{level}" for level in range(depth + 1)]
    chain: list[Seeded] = []
    for level in reversed(range(depth + 1)):
        if level == depth:
            chain.append(
                await client.seed_agent(token, name=names[level], mock_responses=["done"], project=project)
            )
        else:
            nxt = names[level + 1]
            chain.append(
                await client.seed_agent(
                    token,
                    name=names[level],
                    mock_responses=[delegate_response(nxt), f"{names[level]} done"],
                    network_access=[nxt],
                    project=project,
                )
            )
    return list(reversed(chain))


class GrpcChat:
    """`StreamChat` calls to one agent over one channel. Each call checks that the addressed run
    completed and that every delegation in it did (`delegations` of them: a refused delegation
    still ends in an answer, but it did not cost what a delegation costs)."""

    def __init__(
        self, channel: grpc.aio.Channel, seeded: Seeded, *, message: str = "hello", delegations: int = 0
    ) -> None:
        self._stub = gateway_service_pb2_grpc.GatewayServiceStub(channel)
        self._seeded = seeded
        self._metadata = bearer(seeded.token)
        self._message = message
        self._delegations = delegations
        # Seconds from the request to the first text_delta of each chat (first_token_ratio).
        self.first_token_seconds: list[float] = []

    async def __call__(self, session_id: str = "") -> None:
        started = time.perf_counter()
        first_token = True
        call = self._stub.StreamChat(
            # As a client that reads batches does: several events per message.
            gateway_service_pb2.StreamChatRequest(
                agent=self._seeded.ref, message=self._message, session_id=session_id, batch_events=True
            ),
            metadata=self._metadata,
        )
        first: Any = None
        last: Any = None
        delegated = 0
        async for response in call:
            for event in response.events:
                if first is None:
                    first = event
                last = event
                if first_token and event.HasField("text_delta"):
                    first_token = False
                    self.first_token_seconds.append(time.perf_counter() - started)
                if event.HasField("delegation_response"):
                    outcome = event.delegation_response
                    if outcome.outcome != run_pb2.DELEGATION_OUTCOME_COMPLETED:
                        name = run_pb2.DelegationOutcome.Name(outcome.outcome)
                        content = outcome.content[:200]
                        raise ChatFailed(f"delegation to {outcome.target_agent}: {name}: {content}")
                    delegated += 1
        if last is None or not last.HasField("run_completed") or last.run_id != first.run_id:
            raise ChatFailed(f"chat with {self._seeded.ref} ended with {last}")
        if delegated != self._delegations:
            raise ChatFailed(f"{delegated} delegations completed, {self._delegations} expected")


class StreamingChat:
    """A `StreamChat` that says when its first event arrived (the run started) and must end in
    the addressed run's run_completed."""

    def __init__(self, channel: grpc.aio.Channel, seeded: Seeded) -> None:
        self._stub = gateway_service_pb2_grpc.GatewayServiceStub(channel)
        self._seeded = seeded
        self._metadata = bearer(seeded.token)

    async def __call__(self, on_first_event: Callable[[], None], *, timeout: float) -> None:
        call = self._stub.StreamChat(
            gateway_service_pb2.StreamChatRequest(agent=self._seeded.ref, message="stream"),
            metadata=self._metadata,
            timeout=timeout,
        )
        first: Any = None
        last: Any = None
        async for response in call:
            if first is None:
                first = response.event
                on_first_event()
            last = response.event
        if last is None or not last.HasField("run_completed") or last.run_id != first.run_id:
            raise ChatFailed(f"stream ended with {last}")


class HttpChat:
    """OpenAI-compatible `POST /v1/chat/completions` with `stream: true`, read to `data: [DONE]`."""

    def __init__(self, http: httpx.AsyncClient, seeded: Seeded, *, message: str = "hello") -> None:
        self._http = http
        self._body = {
            "model": seeded.ref,
            "messages": [{"role": "user", "content": message}],
            "stream": True,
        }
        self._headers = {"Authorization": f"Bearer {seeded.token}"}

    async def __call__(self) -> None:
        done = False
        async with self._http.stream(
            "POST", "/v1/chat/completions", json=self._body, headers=self._headers
        ) as response:
            if response.status_code != 200:
                await response.aread()
                raise ChatFailed(f"HTTP {response.status_code}: {response.text[:300]}")
            async for line in response.aiter_lines():
                if line.strip() == "data: [DONE]":
                    done = True
        if not done:
            raise ChatFailed("the event stream ended without data: [DONE]")


class MemoryAppender:
    """`AppendEvents` straight to the memory service: one ~300-byte event per call, answered with
    receipts (`receipts_only`), as the executor asks."""

    def __init__(
        self, channel: grpc.aio.Channel, *, project_id: str, content: str, agent: str = "bench"
    ) -> None:
        self._stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        # The memory service authenticates every call: append as the mesh's services do, with
        # a system token (one that outlives a bench run).
        self.metadata = bearer(TokenCodec(JWT_SECRET).issue(SYSTEM, ttl_seconds=24 * 3600))
        self._project_id = project_id
        self._event = memory_service_pb2.NewEvent(
            agent=agent, event_type=resources_pb2.EVENT_TYPE_AGENT_RESPONSE, content=content
        )

    def session(self, session_id: str | None = None, *, events: int = 1) -> _SessionAppend:
        """Appends of `events` events per call to one session (a new one unless named)."""
        return _SessionAppend(self, session_id or uuid.uuid4().hex, events=events)

    async def fill(self, session_id: str, *, agent: str, events: int, batch: int = 1000) -> None:
        """Appends `events` alternating user/agent events of `agent` to a session, in batches."""
        kinds = (resources_pb2.EVENT_TYPE_USER_MESSAGE, resources_pb2.EVENT_TYPE_AGENT_RESPONSE)
        written = 0
        while written < events:
            count = min(batch, events - written)
            request = memory_service_pb2.AppendEventsRequest(
                session_id=session_id,
                project_id=self._project_id,
                events=[
                    memory_service_pb2.NewEvent(
                        agent=agent, event_type=kinds[(written + i) % 2], content=self._event.content
                    )
                    for i in range(count)
                ],
            )
            await self._stub.AppendEvents(request, timeout=60, metadata=self.metadata)
            written += count


class _SessionAppend:
    def __init__(self, appender: MemoryAppender, session_id: str, *, events: int = 1) -> None:
        self._stub = appender._stub
        self._metadata = appender.metadata
        self._request = memory_service_pb2.AppendEventsRequest(
            session_id=session_id,
            project_id=appender._project_id,
            events=[appender._event] * events,
            receipts_only=True,  # as the executor appends: receipts, not the events echoed back
        )

    async def __call__(self) -> None:
        await self._stub.AppendEvents(self._request, timeout=30, metadata=self._metadata)


def rss_mb(pid: int) -> float:
    """A process's resident set size now, in MB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def wait_quiet(seconds: float = 0.5) -> None:
    """Lets stragglers of the previous measurement (run bookkeeping, exports) finish."""
    await asyncio.sleep(seconds)
