"""The executor's client: the only module of the executor that other services import.

`ExecutorClient` makes typed calls to one executor. `RunRouter` is how anything sends a run to
the executor pool — the gateway for chats, executors for delegations and workflow sub-agents: it
owns the channels (one per executor, created once), learns the pool from the registry's executor
membership and the executors' health, picks an executor per session, fails a refused run over,
and signs the system token the pool's bookkeeping calls carry. The failover rules live here only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.errors import FOLLOWED_IN_LOG, NO_EXECUTOR, ExecutorBusy
from agentmesh.internal.executor.v1 import executor_service_pb2 as pb
from agentmesh.internal.executor.v1 import executor_service_pb2_grpc as pb_grpc
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.channels import NO_PEER_SECURITY, PeerSecurity, create_channel
from agentmesh.runtime.client import Metadata, stream, unary
from agentmesh.runtime.database_errors import DATABASE_POOL_EXHAUSTED, DATABASE_UNAVAILABLE
from agentmesh.runtime.errors import PEER_SERVICE, PEER_UNAVAILABLE, DomainError, Unavailable
from agentmesh.runtime.identity import AUTHORIZATION, TokenCodec
from agentmesh.runtime.telemetry import untraced

logger = logging.getLogger(__name__)

# The reason an executor refuses a run with when it is at its concurrency cap (RESOURCE_EXHAUSTED).
EXECUTOR_BUSY = ExecutorBusy.default_reason

# How long a run every executor refused waits before the pool is tried again, doubling up to the
# most (RunRouter.run's `placement_seconds`): about a channel's reconnect backoff (runtime
# `channels.py`), so an executor back from a restart is tried soon after it serves.
_FIRST_PLACEMENT_PAUSE_SECONDS = 0.1
_MAX_PLACEMENT_PAUSE_SECONDS = 1.0

# TokenCodec.system_token() signs tokens that live 300 s; one is reused until a minute before.
_SYSTEM_TOKEN_TTL_SECONDS = 300.0
_SYSTEM_TOKEN_RENEW_SECONDS = 60.0


def may_fail_over(error: DomainError, *, started: bool) -> bool:
    """Whether a run that failed with `error` may be sent to another executor instead.

    Only a run that no event of has arrived yet: the executor refused it before it began (busy
    at its cap) or could not be reached (UNAVAILABLE, whatever the reason). Once an event was
    passed on, running it again elsewhere would repeat what the caller already saw; a started
    run is resumed from the session's events, not retried. Any other error (not found, paused,
    permission denied, …) would be the same on every executor — and so would an executor's
    report that the registry or the memory service, which every executor shares, is down. A run
    handed over or taken over before its first event arrived is in the log already: it is
    followed there (`FOLLOWED_IN_LOG`), not run twice.
    """
    if started or is_dependency_outage(error) or error.reason in FOLLOWED_IN_LOG:
        return False
    return error.code == grpc.StatusCode.UNAVAILABLE or error.reason == EXECUTOR_BUSY


def is_unreachable(error: DomainError) -> bool:
    """Whether `error` says the executor itself is down (so it is tried last until it serves)."""
    return error.code == grpc.StatusCode.UNAVAILABLE and not is_dependency_outage(error)


def is_dependency_outage(error: DomainError) -> bool:
    """Whether `error` is an executor saying that a service it depends on could not be reached,
    or that service's database: the executor answered, so it is not the one to blame. (A
    registry's database restarting was taken for every executor down — "no executor could be
    reached" — before DATABASE_UNAVAILABLE counted here: the PostgreSQL restart fault test.)"""
    if error.reason in (DATABASE_UNAVAILABLE, DATABASE_POOL_EXHAUSTED):
        return True
    return error.reason == PEER_UNAVAILABLE and error.metadata.get(PEER_SERVICE, "executor") != "executor"


class RunNotPlaced(Unavailable):
    """No executor of the pool took the run: there is none, or each refused it before it began.

    `refusals` holds what each executor answered, in the order they were tried; `busy` says
    whether one was only at its concurrency cap (the caller may push back and ask to retry).
    """

    default_reason = NO_EXECUTOR

    def __init__(self, refusals: Sequence[DomainError] = ()) -> None:
        self.refusals = tuple(refusals)
        # In the caller's terms: what each executor answered (with gRPC core's addresses in it)
        # is logged where it happens, never passed on.
        if not self.refusals:
            message = "no executor is available"
        elif self.busy:
            message = "no executor could take the run: every executor is at its concurrency cap"
        else:
            message = "no executor could take the run: no executor could be reached"
        super().__init__(message)

    @property
    def busy(self) -> bool:
        return any(error.reason == EXECUTOR_BUSY for error in self.refusals)

    @property
    def last(self) -> DomainError:
        """The last executor's answer (this error itself when there was no executor)."""
        return self.refusals[-1] if self.refusals else self


# The executor's errors its callers act on (a busy executor: try another).
__all__ = [
    "EXECUTOR_BUSY",
    "FOLLOWED_IN_LOG",
    "ExecutorBusy",
    "ExecutorClient",
    "RunNotPlaced",
    "RunRouter",
    "may_fail_over",
]


class ExecutorClient:
    """Typed calls to one executor; failures raise the DomainError it raised."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.ExecutorServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    async def run(
        self, request: pb.RunRequest, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """Every event of the run, one by one. The run is asked for batches (several events per
        message: fewer messages on every hop, each costing CPU on both ends) and they are
        unpacked here, so callers see the same events in the same order either way."""
        request.batch_events = True
        async for response in stream(self.stub.Run, request, timeout=timeout, metadata=metadata):
            if response.HasField("event"):
                yield response.event
            for event in response.events:
                yield event

    async def get_stats(self, *, metadata: Metadata | None = None) -> pb.GetStatsResponse:
        return await unary(self.stub.GetStats, pb.GetStatsRequest(), metadata=metadata)

    async def end_session(self, session_id: str, *, metadata: Metadata | None = None) -> int:
        """Tears down what the executor caches for a session; how many agents it released."""
        request = pb.EndSessionRequest(session_id=session_id)
        return (await unary(self.stub.EndSession, request, metadata=metadata)).released_agents

    async def cancel_runs(
        self,
        project_id: str,
        agent_id: str,
        *,
        reason: str = "",
        run_id: str = "",
        metadata: Metadata | None = None,
    ) -> int:
        """Cancels the agent's runs in flight on this executor (only `run_id` when given); how
        many it cancelled."""
        request = pb.CancelRunsRequest(project_id=project_id, agent_id=agent_id, reason=reason, run_id=run_id)
        return (await unary(self.stub.CancelRuns, request, metadata=metadata)).cancelled_runs

    async def serving(self, *, timeout: float) -> bool:
        """Whether the executor's health service says it serves (False when it cannot be asked)."""
        try:
            reply = await self._health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING


class SystemToken:
    """Call metadata carrying a system token, signed once and reused until shortly before it
    expires (signing one per call cost CPU on every run's bookkeeping). Without a signing secret
    there is none, and callers that need it skip what they would have done with it."""

    def __init__(self, tokens: TokenCodec | None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._tokens = tokens
        self._clock = clock
        self._metadata: Metadata | None = None
        self._renew_at = 0.0

    def metadata(self) -> Metadata | None:
        if self._tokens is None:
            return None
        now = self._clock()
        if self._metadata is None or now >= self._renew_at:
            self._metadata = ((AUTHORIZATION, f"Bearer {self._tokens.system_token()}"),)
            self._renew_at = now + _SYSTEM_TOKEN_TTL_SECONDS - _SYSTEM_TOKEN_RENEW_SECONDS
        return self._metadata


class PoolSettings(Protocol):
    """The settings a service that sends runs to the pool (the executor, the gateway) has for it."""

    @property
    def executor_addresses(self) -> Sequence[str]: ...
    @property
    def executor_discovery(self) -> bool: ...
    @property
    def executor_refresh_interval_seconds(self) -> float: ...
    @property
    def executor_health_interval_seconds(self) -> float: ...
    @property
    def max_message_bytes(self) -> int: ...


class RunRouter:
    """Sends runs to the executor pool, with session affinity and failover.

    The pool is the configured addresses plus, with discovery on, the executors the registry
    lists (asked every `refresh_interval_seconds`, with the system token); every member is
    health-checked every `health_interval_seconds`, and one that is down or draining is tried
    last until it serves again. When the pool is empty, runs go to `fallback_address` (an
    executor names itself there, so its delegations still go over gRPC).

    A session always maps to the same executor while it is healthy (rendezvous hashing over the
    healthy members), so its agent cache hits. A run refused before any event of it arrived
    (`may_fail_over`) goes to the next executor in the session's order; when none takes it,
    `RunNotPlaced` says why.
    """

    def __init__(
        self,
        registry: RegistryClient,
        system_token: SystemToken,
        *,
        addresses: Sequence[str] = (),
        discovery: bool = True,
        refresh_interval_seconds: float,
        health_interval_seconds: float,
        health_timeout_seconds: float = 1.0,
        max_message_bytes: int = 4 * 1024 * 1024,
        security: PeerSecurity = NO_PEER_SECURITY,
    ) -> None:
        self._registry = registry
        self._security = security
        self._system_token = system_token
        self._discovery = discovery
        self._refresh_interval = refresh_interval_seconds
        self._health_interval = health_interval_seconds
        self._health_timeout = health_timeout_seconds
        self._max_message_bytes = max_message_bytes
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._clients: dict[str, ExecutorClient] = {}
        self._unhealthy: set[str] = set()
        self._fallback = ""
        self._tasks: list[asyncio.Task[None]] = []
        for address in addresses:
            self._add(address)

    @classmethod
    def for_pool(
        cls,
        registry: RegistryClient,
        system_token: SystemToken,
        settings: PoolSettings,
        *,
        security: PeerSecurity,
    ) -> RunRouter:
        """The router a service builds from its settings, so that every service reads them alike."""
        return cls(
            registry,
            system_token,
            addresses=settings.executor_addresses,
            discovery=settings.executor_discovery,
            refresh_interval_seconds=settings.executor_refresh_interval_seconds,
            health_interval_seconds=settings.executor_health_interval_seconds,
            max_message_bytes=settings.max_message_bytes,
            security=security,
        )

    @property
    def addresses(self) -> list[str]:
        """The executors of the pool (the fallback included once it was used)."""
        return sorted(self._clients)

    def system_metadata(self) -> Metadata | None:
        """Metadata with the system token, for the pool's own bookkeeping calls."""
        return self._system_token.metadata()

    async def start(self, *, fallback_address: str = "") -> None:
        """Learns the pool once, then keeps it up to date in the background until `stop`."""
        self._fallback = fallback_address
        with untraced():
            await self.refresh()
            await self.check_health()
            self._tasks = [asyncio.create_task(_every(self._health_interval, self.check_health))]
            if self._discovery:
                self._tasks.append(asyncio.create_task(_every(self._refresh_interval, self.refresh)))

    async def stop(self) -> None:
        """Stops the background work and closes every channel."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for channel in self._channels.values():
            await channel.close()

    async def refresh(self) -> None:
        """Adds the executors the registry lists; a registry that cannot answer changes nothing."""
        metadata = self.system_metadata()
        if not self._discovery or metadata is None:
            return
        try:
            executors = await self._registry.list_executors(metadata=metadata)
        except DomainError as error:
            logger.warning("could not list executors from the registry: %s", error.message)
            return
        for executor in executors:
            if executor.address and executor.address not in self._clients:
                logger.info("executor %s (%s) joined the pool", executor.id, executor.address)
                self._add(executor.address)

    async def check_health(self) -> None:
        """Asks every executor's health service and marks it healthy or not."""

        async def check(address: str, client: ExecutorClient) -> None:
            self._mark(address, healthy=await client.serving(timeout=self._health_timeout))

        await asyncio.gather(*(check(address, client) for address, client in list(self._clients.items())))

    def candidates(self, session_id: str) -> list[tuple[str, ExecutorClient]]:
        """Executors in the order a session should try them: healthy first, by rendezvous hash."""
        if not self._clients and self._fallback:
            self._add(self._fallback)
        ranked = sorted(self._clients, key=lambda a: _rendezvous(session_id, a), reverse=True)
        ranked.sort(key=lambda a: a in self._unhealthy)
        return [(address, self._clients[address]) for address in ranked]

    async def run(
        self,
        request: pb.RunRequest,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        placement_seconds: float = 0.0,
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """Every event of the run (the runs below it included), from the first executor that
        takes it. When every executor refuses it for now (busy at its cap, unreachable), the pool
        is tried again after a pause that doubles, for up to `placement_seconds` (within
        `timeout`): an executor back from a restart, or a slot freed, takes it then. Raises
        `RunNotPlaced` when none does, and the run's own error once it began; leaving the
        iteration early cancels the run below at once."""
        loop = asyncio.get_running_loop()
        started_at = loop.time()
        give_up_at = started_at + (placement_seconds if timeout is None else min(placement_seconds, timeout))
        pause = _FIRST_PLACEMENT_PAUSE_SECONDS
        while True:
            refusals: list[DomainError] = []
            remaining = None if timeout is None else timeout - (loop.time() - started_at)
            for address, client in self.candidates(request.session_id):
                started = False
                events = client.run(request, timeout=remaining, metadata=metadata)
                try:
                    async with contextlib.aclosing(events):
                        async for event in events:
                            started = True
                            yield event
                except DomainError as error:
                    if not may_fail_over(error, started=started):
                        raise
                    logger.warning(
                        "executor %s refused a run (%s: %s); trying the next",
                        address,
                        error.reason,
                        error.message,
                    )
                    if is_unreachable(error):
                        self._mark(address, healthy=False)
                    refusals.append(error)
                    continue
                self._mark(address, healthy=True)
                return
            if loop.time() + pause > give_up_at:
                raise RunNotPlaced(refusals)
            await asyncio.sleep(pause)
            pause = min(pause * 2, _MAX_PLACEMENT_PAUSE_SECONDS)

    async def cancel_runs(
        self,
        project_id: str,
        agent_id: str,
        *,
        reason: str,
        run_id: str = "",
        metadata: Metadata | None = None,
    ) -> int:
        """Cancels the agent's runs in flight (only `run_id` when given) on every executor of the
        pool; how many were cancelled. Best effort: an executor that cannot be reached is logged
        and skipped — its runs cannot be in flight on a dead executor."""
        return await self._on_every(
            f"cancel runs of agent {agent_id}",
            lambda client: client.cancel_runs(
                project_id, agent_id, reason=reason, run_id=run_id, metadata=metadata
            ),
        )

    async def end_session(self, session_id: str, *, metadata: Metadata | None = None) -> int:
        """Ends the session on every executor of the pool (its cached agents released); how many
        agents were released. Best effort, as `cancel_runs`: a dead executor keeps nothing."""
        return await self._on_every(
            f"end session {session_id}", lambda client: client.end_session(session_id, metadata=metadata)
        )

    async def _on_every(self, what: str, call: Callable[[ExecutorClient], Awaitable[int]]) -> int:
        async def one(address: str, client: ExecutorClient) -> int:
            try:
                return await call(client)
            except DomainError as error:
                logger.warning("could not %s on %s: %s", what, address, error.message)
                return 0

        counts = await asyncio.gather(*(one(address, client) for address, client in self.clients()))
        return sum(counts)

    def clients(self) -> list[tuple[str, ExecutorClient]]:
        """Every executor of the pool, healthy or not, by address."""
        return sorted(self._clients.items())

    def _add(self, address: str) -> None:
        if address not in self._clients:
            channel = create_channel(
                address, max_message_bytes=self._max_message_bytes, security=self._security
            )
            self._channels[address] = channel
            self._clients[address] = ExecutorClient(channel)

    def _mark(self, address: str, *, healthy: bool) -> None:
        (self._unhealthy.discard if healthy else self._unhealthy.add)(address)


async def _every(interval_seconds: float, action: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(interval_seconds)
        try:
            await action()
        except Exception:
            logger.exception("periodic executor pool task failed")


def _rendezvous(session_id: str, address: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{session_id}|{address}".encode(), digest_size=8).digest(), "big")
