"""The tenants section: one tenant does what a hostile user of a shared mesh can do — delegations
that fan out, many slow streams, many idle watches, reads of a large history — while a second
tenant chats; the second tenant's latency is compared with its quiet run just before.

Both tenants are ordinary users with a project each (a superuser only declares the agent types),
so whatever the mesh enforces per project or per user applies to them as it would in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import types_pb2
from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from bench.mesh import GrpcChat, MemoryAppender, Mesh, StreamingChat, delegate_response, wait_quiet
from bench.plan import Plan
from bench.report import Results, describe_error
from bench.stats import latency, warm_up
from tests.mesh import MeshClient, Seeded, bearer

# A tenant's password (each tenant is a user made for the run).
_PASSWORD = "bench-tenant-password"
# Delegations each run of the fan-out pair starts in one step.
FANOUT_WIDTH = 3


async def tenants(plan: Plan, results: Results, mesh: Mesh, client: MeshClient, admin_token: str) -> None:
    with results.section("tenants", ("tenant_p50_ratio", "tenant_p99_ratio", "tenant_refused")):
        victim_token = await _tenant(client, admin_token, "victim")
        hostile_token = await _tenant(client, admin_token, "hostile")
        victim = await client.seed_agent(
            victim_token, name="assistant", mock_responses=["hello"], type_token=admin_token
        )
        chat = GrpcChat(mesh.channel(mesh.gateway_address), victim)
        await warm_up(chat, plan.warmup_calls)
        # Every failure of the measured tenant's chats counts as refused (none may be).
        quiet = await latency(chat, plan.tenant_calls)
        attack = await _Attack.prepare(plan, mesh, client, admin_token, hostile_token)
        await wait_quiet()
        async with attack.running():
            loaded = await latency(chat, plan.tenant_calls)
        results.details["tenants"] = {
            "quiet": quiet.summary(),
            "loaded": loaded.summary(),
            "hostile": attack.summary(),
        }
        results.set("tenant_p50_ratio", loaded.p50_ms / quiet.p50_ms)
        results.set("tenant_p99_ratio", loaded.p99_ms / quiet.p99_ms)
        results.set("tenant_refused", loaded.errors + quiet.errors, digits=0)


async def _tenant(client: MeshClient, admin_token: str, role: str) -> str:
    email = f"{role}-{uuid.uuid4().hex[:8]}@bench.example"
    await client.registry.CreateUser(
        reg.CreateUserRequest(email=email, password=_PASSWORD, first_name=role, last_name="tenant"),
        metadata=bearer(admin_token),
    )
    return await client.login(email, _PASSWORD)


class _Attack:
    """The hostile tenant's load: each kind runs until the victim's measurement is done; what
    each achieved (and the first errors it met) is reported, since a mesh that refuses the hostile
    tenant is doing its job."""

    def __init__(self, plan: Plan, mesh: Mesh, hostile: dict[str, Seeded], history_session: str) -> None:
        self._plan = plan
        self._mesh = mesh
        self._hostile = hostile
        self._history_session = history_session
        self._stop = asyncio.Event()
        self._done: dict[str, int] = {}
        self._errors: dict[str, list[str]] = {}

    @classmethod
    async def prepare(
        cls, plan: Plan, mesh: Mesh, client: MeshClient, admin_token: str, token: str
    ) -> _Attack:
        # Two agents that may delegate to each other, each delegating FANOUT_WIDTH times at once:
        # without a bound on the tree, one chat makes FANOUT_WIDTH ** depth runs.
        ping = await client.seed_agent(
            token, name="ping", mock_responses=[_fan_out("pong"), "ping done"], type_token=admin_token
        )
        await client.seed_agent(
            token,
            name="pong",
            mock_responses=[_fan_out("ping"), "pong done"],
            network_access=["ping"],
            project=ping,
            type_token=admin_token,
        )
        # Only now that pong exists may ping name it.
        config = resources_pb2.AgentConfig(network_access=types_pb2.StringList(values=["pong"]))
        await client.registry.UpdateAgent(
            reg.UpdateAgentRequest(
                agent=resources_pb2.Agent(project_id=ping.project_id, id=ping.agent_id, config=config),
                update_mask=field_mask_pb2.FieldMask(paths=["config.network_access"]),
            ),
            metadata=bearer(token),
        )
        script = [{"content": "slow " * 4, "delay_seconds": plan.tenant_stream_delay_seconds}] * 3
        slow = await client.seed_agent(
            token, name="slow", mock_responses=script, project=ping, type_token=admin_token
        )
        reader = await client.seed_agent(
            token, name="reader", mock_responses=["read"], project=ping, type_token=admin_token
        )
        appender = MemoryAppender(
            mesh.channel(mesh.memory_address),
            project_id=reader.project_id,
            content="x" * plan.tenant_event_bytes,
        )
        session = f"bench-tenants-{uuid.uuid4().hex[:8]}"
        await appender.fill(session, agent=reader.agent_name, events=plan.tenant_history_events, batch=20)
        return cls(plan, mesh, {"fanout": ping, "slow": slow, "reader": reader}, session)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        plan = self._plan
        gateway = [self._mesh.channel(self._mesh.gateway_address) for _ in range(plan.stream_channels)]
        # Not a GrpcChat: how many delegations a fan-out makes is the mesh's to bound.
        fanout = StreamingChat(gateway[0], self._hostile["fanout"])
        streaming = [StreamingChat(channel, self._hostile["slow"]) for channel in gateway]
        memory = [memory_service_pb2_grpc.MemoryServiceStub(channel) for channel in gateway]
        reader = self._hostile["reader"]
        metadata = bearer(reader.token)
        timeout = plan.stream_timeout_seconds

        async def stream(number: int) -> None:
            await streaming[number % len(streaming)](lambda: None, timeout=timeout)

        async def watch(number: int) -> None:
            # After the last event of a session nobody writes to: open and idle until cancelled.
            call = memory[number % len(memory)].WatchEvents(
                memory_service_pb2.WatchEventsRequest(
                    session_id=self._history_session,
                    project_id=reader.project_id,
                    after_seq=plan.tenant_history_events,
                ),
                metadata=metadata,
            )
            async for _ in call:
                pass

        async def read(number: int) -> None:
            await memory[number % len(memory)].ListEvents(
                memory_service_pb2.ListEventsRequest(
                    session_id=self._history_session, project_id=reader.project_id, page_size=1000
                ),
                metadata=metadata,
                timeout=60,
            )

        loops = [
            *self._repeat(
                "fanout", lambda _n: fanout(lambda: None, timeout=timeout), plan.tenant_fanout_chats
            ),
            *self._repeat("streams", stream, plan.tenant_streams),
            *self._repeat("reads", read, plan.tenant_readers),
        ]
        watches = [
            asyncio.create_task(self._counted("watches", watch(n))) for n in range(plan.tenant_watches)
        ]
        try:
            yield
        finally:
            self._stop.set()
            for task in watches:
                task.cancel()
            await asyncio.gather(*loops, *watches, return_exceptions=True)

    def _repeat(
        self, kind: str, call: Callable[[int], Awaitable[Any]], workers: int
    ) -> list[asyncio.Task[None]]:
        """`workers` loops making `call` again and again until stopped."""

        async def loop(number: int) -> None:
            while not self._stop.is_set():
                await self._counted(kind, call(number))

        return [asyncio.create_task(loop(number)) for number in range(workers)]

    async def _counted(self, kind: str, call: Awaitable[Any]) -> None:
        try:
            await call
            self._done[kind] = self._done.get(kind, 0) + 1
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the hostile tenant's failures are figures, not faults
            self._errors.setdefault(kind, []).append(describe_error(error))
            if not self._stop.is_set():
                await asyncio.sleep(0.1)  # a refused caller backs off, as a real client would

    def summary(self) -> dict[str, Any]:
        return {
            kind: {
                "completed": self._done.get(kind, 0),
                "errors": len(self._errors.get(kind, [])),
                "first_errors": sorted(set(self._errors.get(kind, [])))[:3],
            }
            for kind in ("fanout", "streams", "watches", "reads")
        }


def _fan_out(to: str) -> dict[str, Any]:
    """A mock answer that delegates to `to` FANOUT_WIDTH times in one step."""
    call = delegate_response(to)["tool_calls"][0]
    return {"content": "", "tool_calls": [call] * FANOUT_WIDTH}
