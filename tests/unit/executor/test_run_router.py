"""RunRouter, the one router the gateway (chats) and executors (delegations) send runs with:
failover while no event has arrived, push-back when every executor is busy, no retry once a run
has started, session affinity, discovery, health and the system token. The executors are small
fake ExecutorServices on real gRPC servers (port 0)."""

from __future__ import annotations

import grpc
import pytest

from agentmesh.executor.client import (
    EXECUTOR_BUSY,
    RunNotPlaced,
    RunRouter,
    SystemToken,
    is_unreachable,
    may_fail_over,
)
from agentmesh.internal.executor.v1 import executor_service_pb2 as pb
from agentmesh.runtime.database_errors import DATABASE_UNAVAILABLE
from agentmesh.runtime.errors import (
    FailedPrecondition,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from agentmesh.runtime.identity import TokenCodec
from tests.unit.executor.fake_executors import (
    SECRET,
    FakeExecutor,
    FakeRegistry,
    Serve,
    router,
    serve,
    unreachable,
)

__all__ = ["serve"]  # the fixture

CALLER = (("authorization", "Bearer caller-token"),)


async def answer(run_router: RunRouter, session_id: str = "s1") -> str:
    events = [e async for e in run_router.run(pb.RunRequest(session_id=session_id), metadata=CALLER)]
    return events[-1].run_completed.content


async def test_a_busy_or_unreachable_executor_hands_the_run_to_the_next(serve: Serve) -> None:
    busy = FakeExecutor(fail=ResourceExhausted("full", reason=EXECUTOR_BUSY))
    busy_server, third = await serve(busy), await serve(FakeExecutor(answer="from the third"))
    down = await unreachable(serve)
    pool = router(busy_server.address, down, third.address)

    def order(session_id: str) -> list[str]:
        return [address for address, _ in pool.candidates(session_id)]

    # Sessions whose first choices are the busy and the unreachable executor (the rendezvous
    # order depends on the ports, so they are picked, not assumed).
    sessions = [f"s{i}" for i in range(200)]
    before_third = {
        address: next(s for s in sessions if order(s).index(address) < order(s).index(third.address))
        for address in (busy_server.address, down)
    }
    for session in (*before_third.values(), "a", "b"):
        assert await answer(pool, session) == "from the third"
    assert busy.tokens and set(busy.tokens) == {"Bearer caller-token"}  # the caller's token goes along
    # The unreachable one is now tried last by every session; the busy one was not marked.
    assert {order(session)[-1] for session in sessions[:32]} == {down}
    await pool.stop()


async def test_when_no_executor_takes_the_run_it_says_whether_they_were_busy(serve: Serve) -> None:
    busy = await serve(FakeExecutor(fail=ResourceExhausted("full", reason=EXECUTOR_BUSY)))
    down = await unreachable(serve)
    with pytest.raises(RunNotPlaced) as both:
        await answer(router(busy.address, down))
    assert both.value.busy
    assert {error.code for error in both.value.refusals} == {
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
    }
    with pytest.raises(RunNotPlaced) as only_down:
        await answer(router(down))
    assert not only_down.value.busy
    assert only_down.value.last.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(RunNotPlaced, match="no executor is available") as none:
        await answer(router())
    assert none.value.code == grpc.StatusCode.UNAVAILABLE


async def test_a_started_run_or_a_real_error_is_not_retried(serve: Serve) -> None:
    second = FakeExecutor()
    second_server = await serve(second)
    died = await serve(FakeExecutor(fail=Unavailable("died"), fail_after_start=True))
    refused = await serve(FakeExecutor(fail=FailedPrecondition("paused", reason="AGENT_PAUSED")))
    for first, error in ((died, Unavailable), (refused, FailedPrecondition)):
        pool = router(first.address, second_server.address)
        # A session whose first choice is the failing executor.
        session = next(s for s in map(str, range(100)) if pool.candidates(s)[0][0] == first.address)
        with pytest.raises(error):
            await answer(pool, session)
    assert second.tokens == []


def test_failover_rules_in_one_place() -> None:
    assert may_fail_over(Unavailable("down"), started=False)
    assert may_fail_over(Unavailable("draining", reason="DRAINING"), started=False)
    assert may_fail_over(ResourceExhausted("full", reason=EXECUTOR_BUSY), started=False)
    assert not may_fail_over(ResourceExhausted("too big", reason="MESSAGE_TOO_LARGE"), started=False)
    assert not may_fail_over(NotFound("no agent"), started=False)
    assert not may_fail_over(Unavailable("died"), started=True)
    # The registry's or memory's database away: every executor would say the same.
    database = Unavailable("the registry service's database is unavailable", reason=DATABASE_UNAVAILABLE)
    assert not may_fail_over(database, started=False)
    assert not is_unreachable(database)


async def test_a_session_sticks_to_its_executor_while_it_is_healthy(serve: Serve) -> None:
    servers = [await serve(FakeExecutor()) for _ in range(3)]
    pool = router(*(server.address for server in servers))
    first = {s: pool.candidates(s)[0][0] for s in map(str, range(30))}
    assert len(set(first.values())) > 1, "sessions spread over the executors"
    assert {s: pool.candidates(s)[0][0] for s in first} == first
    # An executor that stops serving (draining) is tried last once health says so.
    draining = servers[0]
    await draining.set_serving(False)
    await pool.check_health()
    assert all(pool.candidates(s)[-1][0] == draining.address for s in first)
    await draining.set_serving(True)
    await pool.check_health()
    assert {s: pool.candidates(s)[0][0] for s in first} == first
    await pool.stop()


async def test_discovery_adds_the_registry_executors_with_the_system_token(serve: Serve) -> None:
    static, listed = await serve(FakeExecutor(answer="static")), await serve(FakeExecutor(answer="listed"))
    registry = FakeRegistry(listed.address)
    pool = router(static.address, registry=registry, discovery=True)
    await pool.start()
    assert pool.addresses == sorted([static.address, listed.address])
    (metadata,) = registry.metadata
    assert metadata is pool.system_metadata()  # one token, reused
    ((key, value),) = metadata  # type: ignore[misc]
    assert key == "authorization"
    assert TokenCodec(SECRET).verify(value.removeprefix("Bearer ")).is_system
    await pool.stop()

    off = router(static.address, registry=FakeRegistry(listed.address), discovery=False)
    await off.start()
    assert off.addresses == [static.address]
    await off.stop()


async def test_an_empty_pool_sends_runs_to_the_fallback(serve: Serve) -> None:
    itself = await serve(FakeExecutor(answer="myself"))
    pool = router()
    await pool.start(fallback_address=itself.address)
    assert await answer(pool) == "myself"
    await pool.stop()


def test_the_system_token_is_signed_once_and_renewed_before_it_expires() -> None:
    now = [0.0]
    token = SystemToken(TokenCodec(SECRET), clock=lambda: now[0])
    first = token.metadata()
    now[0] = 200.0
    assert token.metadata() is first
    now[0] = 241.0  # within a minute of its 300 s lifetime
    assert token.metadata() != first
    assert SystemToken(None).metadata() is None


async def test_cancelling_an_agent_reaches_every_executor_and_skips_dead_ones(serve: Serve) -> None:
    executors = [FakeExecutor(), FakeExecutor()]
    servers = [await serve(executor) for executor in executors]
    pool = router(*(server.address for server in servers), await unreachable(serve))
    assert await pool.cancel_runs("p", "a", reason="agent terminated", metadata=CALLER) == 2
    assert [executor.cancelled for executor in executors] == [[("p", "a")], [("p", "a")]]
    await pool.stop()
