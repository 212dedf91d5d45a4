"""Chats under load while something dies (whatever it is), and the invariants the mesh
must hold once it is back: no lost acknowledged input, exactly one end per run and one response per
delegation, `seq` gap-free, no run left in the registry's books, and no client told INTERNAL.

A chat's input is *acknowledged* when its client saw the run start (`run_started` on a stream) or
got the answer of a unary `Chat`: from then on the message must be in the session's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.faults.processes import (
    LEASE_SECONDS,
    Processes,
    RunBookkeeping,
    run_bookkeeping,
    seed_delegating_pair,
    session_log,
)
from tests.mesh import MeshClient, Seeded, bearer
from tests.polling import eventually
from tests.run_log import log_problems

# What a chat's client may be told while a part of the mesh is away: never INTERNAL.
OUTAGE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
}


@dataclass
class Outcome:
    """What one chat's client saw."""

    session_id: str
    message: str
    streamed: bool
    acknowledged: bool = False
    final: str = ""  # "run_completed" or "run_failed": the last event of a stream, or a Chat's answer
    error: grpc.aio.AioRpcError | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)


class SignedIn(httpx.Auth):
    """The load's sign-in, renewed as a client that outlives its access token (15 minutes) does:
    signed in again once it is ten minutes old, or at once when the gateway says it expired. A
    long run's checks then read what is there instead of an expired token's refusal."""

    RENEW_AFTER_SECONDS = 600.0

    def __init__(self, client: MeshClient, token: str) -> None:
        self._client = client
        self._token = token
        self._signed_in_at = time.monotonic()
        self._lock = asyncio.Lock()

    async def token(self, *, stale: str = "") -> str:
        """A current access token; `stale` is one the gateway refused, so it is renewed."""
        async with self._lock:
            expired = stale == self._token
            if expired or time.monotonic() - self._signed_in_at > self.RENEW_AFTER_SECONDS:
                self._token = await self._client.login()
                self._signed_in_at = time.monotonic()
            return self._token

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await self.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {await self.token(stale=token)}"
            yield request


@contextlib.asynccontextmanager
async def chat_load(mesh: Processes, name: str, *, worker: Sequence[Any]) -> AsyncIterator[ChatLoad]:
    """A `ChatLoad` on a new worker (these scripted answers) and coordinator pair of `mesh`."""
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        seeded_worker, coordinator = await seed_delegating_pair(client, token, worker=worker)
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        signed_in = SignedIn(client, token)
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, auth=signed_in, timeout=10) as http:
            yield ChatLoad(
                gateway, seeded_worker, coordinator, name, mesh=mesh, http=http, signed_in=signed_in
            )
    finally:
        await client.close()


class ChatLoad:
    """Starts chats — streamed ones to a delegating coordinator, unary ones to its worker — each in
    a session of its own, and keeps what each client saw."""

    def __init__(
        self,
        gateway: gw_grpc.GatewayServiceStub,
        worker: Seeded,
        coordinator: Seeded,
        name: str,
        *,
        mesh: Processes,
        http: httpx.AsyncClient,
        signed_in: SignedIn,
    ) -> None:
        self._gateway = gateway
        self._signed_in = signed_in
        self.mesh = mesh
        self.http = http
        self._worker = worker
        self._coordinator = coordinator
        self._name = name
        self._numbers = itertools.count()
        self.outcomes: list[Outcome] = []
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def project_id(self) -> str:
        return self._worker.project_id

    def through(self, gateway: gw_grpc.GatewayServiceStub, name: str) -> ChatLoad:
        """Chats to the same agents through another gateway (their outcomes kept apart)."""
        return ChatLoad(
            gateway,
            self._worker,
            self._coordinator,
            name,
            mesh=self.mesh,
            http=self.http,
            signed_in=self._signed_in,
        )

    def start(self, count: int) -> list[Outcome]:
        """Starts `count` chats, alternately streamed (delegating) and unary."""
        started = []
        for _ in range(count):
            n = next(self._numbers)
            outcome = Outcome(f"{self._name}-{n}", f"message {n} of {self._name}", streamed=n % 2 == 0)
            chat = self._stream if outcome.streamed else self._unary
            self._tasks.append(asyncio.create_task(chat(outcome)))
            self.outcomes.append(outcome)
            started.append(outcome)
        return started

    async def wait_started(self, outcomes: list[Outcome], *, timeout: float = 60) -> None:
        """Until every streamed chat of `outcomes` saw its run start (a unary one has no sign)."""
        streamed = [outcome.started.wait() for outcome in outcomes if outcome.streamed]
        await asyncio.wait_for(asyncio.gather(*streamed), timeout)

    async def until_answered(self, *, timeout: float = 30) -> None:
        """Until a unary chat is answered again (the mesh reconnected to what came back): one
        chat at a time, each in a session of its own and checked with the rest."""

        async def answered() -> bool:
            n = next(self._numbers)
            outcome = Outcome(f"{self._name}-{n}", f"probe {n} of {self._name}", streamed=False)
            self.outcomes.append(outcome)
            await self._unary(outcome)
            return outcome.final == "run_completed"

        await eventually(answered, timeout=timeout, what="a chat is answered again")

    async def assert_answered(self, count: int) -> None:
        """`count` more chats, each answered (the mesh is whole again)."""
        after = self.start(count)
        await self.finish()
        assert [o.final for o in after] == ["run_completed"] * count, [o.error for o in after]

    async def assert_settles(self, *, timeout: float = LEASE_SECONDS * 15) -> None:
        """Waits until the invariants hold for every chat; fails naming what still breaks them."""
        await assert_settles(self.mesh, self.http, self._worker.project_id, self.outcomes, timeout=timeout)

    async def finish(self, *, timeout: float = LEASE_SECONDS * 30) -> None:
        """Until every chat's call ended (answered, failed, or broken)."""
        await asyncio.wait_for(asyncio.gather(*self._tasks), timeout)

    async def _stream(self, outcome: Outcome) -> None:
        # Inside the try: renewing the sign-in asks the registry, which may be the process down.
        try:
            call = self._gateway.StreamChat(
                gw.StreamChatRequest(
                    agent=self._coordinator.ref, message=outcome.message, session_id=outcome.session_id
                ),
                metadata=bearer(await self._signed_in.token()),
                timeout=LEASE_SECONDS * 25,
            )
            async for response in call:
                event = response.event
                if event.HasField("run_started"):
                    outcome.acknowledged = True
                    outcome.started.set()
                for final in ("run_completed", "run_failed"):
                    if event.HasField(final):
                        outcome.final = final
        except grpc.aio.AioRpcError as error:
            outcome.error = error
        finally:
            outcome.started.set()

    async def _unary(self, outcome: Outcome) -> None:
        try:
            await self._gateway.Chat(
                gw.ChatRequest(
                    agent=self._worker.ref, message=outcome.message, session_id=outcome.session_id
                ),
                metadata=bearer(await self._signed_in.token()),
                timeout=LEASE_SECONDS * 25,
            )
        except grpc.aio.AioRpcError as error:
            outcome.error = error
        else:
            outcome.acknowledged = True
            outcome.final = "run_completed"
        finally:
            outcome.started.set()


async def problems(
    mesh: Processes, http: httpx.AsyncClient, project_id: str, outcomes: list[Outcome]
) -> list[str]:
    """Everything that breaks the invariants now (empty when they hold)."""
    found = []
    for outcome in outcomes:
        events = await session_log(http, project_id, outcome.session_id)
        found += _described(outcome.session_id, events)
        inputs = {e["content"] for e in events if e["event_type"] == "user_message"}
        if outcome.acknowledged and outcome.message not in inputs:
            found.append(f"{outcome.session_id}: acknowledged input {outcome.message!r} is not in the log")
    return found + await books_problems(mesh)


async def resumed_sessions_problems(
    mesh: Processes, http: httpx.AsyncClient, project_id: str, sessions: Iterable[str]
) -> list[str]:
    """What breaks the invariants in these sessions' logs and the registry's books, for runs that
    had to be resumed: every run ended once, every delegation answered once, `seq` gap-free, no
    run closed `EXECUTOR_LOST`, nothing left in flight."""
    found = []
    for session_id in sessions:
        events = await session_log(http, project_id, session_id)
        found += _described(session_id, events)
        if any((e.get("metadata") or {}).get("reason") == "EXECUTOR_LOST" for e in events):
            found.append(f"{session_id}: a run was closed EXECUTOR_LOST instead of resumed")
    return found + await books_problems(mesh)


def _described(session_id: str, events: list[dict[str, Any]]) -> list[str]:
    """The session's log problems, followed by the log itself (one line per event) when it has
    any: what a failure needs to be understood after the processes are gone."""
    found = [f"{session_id}: {problem}" for problem in log_problems(events)]
    if found:
        found += [f"  {session_id} log:"] + [
            f"    {e['seq']:>3} {e['run_id'][:8]:8} {e['agent']:12} {e['event_type']:24} "
            f"d={(e.get('delegation_id') or '')[:8]:8} key={e.get('idempotency_key') or ''} "
            f"{json.dumps(e.get('metadata') or {}, sort_keys=True)[:160]}"
            for e in events
        ]
    return found


async def books_problems(mesh: Processes) -> list[str]:
    """The registry's books, when a run is left in them."""
    books: RunBookkeeping = await run_bookkeeping(mesh.database_url)
    return [] if books.settled else [f"registry books not settled: {books}"]


async def assert_settles(
    mesh: Processes, http: httpx.AsyncClient, project_id: str, outcomes: list[Outcome], *, timeout: float
) -> None:
    """Waits until the invariants hold for every chat; fails naming what still breaks them."""
    await until_no_problems(mesh, lambda: problems(mesh, http, project_id, outcomes), timeout=timeout)


async def until_no_problems(
    mesh: Processes,
    find: Callable[[], Awaitable[list[str]]],
    *,
    timeout: float,
    what: str = "the mesh settles",
) -> None:
    """Polls `find` until it finds nothing; fails with what it still finds and the processes' logs."""

    async def holds() -> bool:
        try:
            return await find() == []
        except (httpx.HTTPError, OSError):
            return False

    try:
        await eventually(holds, timeout=timeout, what=what)
    except AssertionError:
        found = await find()
        logs = "\n".join(
            process.output() for process in (*mesh.executors.values(), mesh.memory, mesh.registry)
        )
        raise AssertionError(f"{what}: " + "\n".join(found) + "\n" + logs) from None


def assert_told_clearly(outcomes: list[Outcome], part: str, *internal_addresses: str) -> None:
    """A client may be told that a part is away — `part` named in the message — never INTERNAL,
    never a service's address."""
    for outcome in outcomes:
        error = outcome.error
        if error is None:
            continue
        details = error.details() or ""
        assert error.code() in OUTAGE_CODES, f"{outcome.session_id}: {error.code()} {details!r}"
        assert part in details, f"{outcome.session_id}: {details!r} does not name the {part}"
        for address in internal_addresses:
            assert address not in details, f"{outcome.session_id}: {details!r} names {address}"


async def delegating_chat(
    gateway: gw_grpc.GatewayServiceStub, coordinator: Seeded, session_id: str, delegating: asyncio.Semaphore
) -> list[run_pb2.RunEvent]:
    """A streamed chat's events; releases `delegating` once the chat delegated (its runs are in
    flight: what a rolling restart or an upgrade stops executors under)."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.ref, message="go", session_id=session_id),
        metadata=bearer(coordinator.token),
        timeout=120,
    )
    events = []
    async for response in call:
        events.append(response.event)
        if response.event.HasField("delegation_request"):
            delegating.release()
    return events
