"""The agent cache on its own, with fake builders and a fake clock: hits and rebuilds, LRU order,
mid-run entries never evicted, racing requests sharing one build, the idle TTL, and soft release
(eviction) versus full teardown (session end)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

import pytest

from agentmesh.executor.agents.cache import OVER_CAP_WARNING_SECONDS, AgentCache, SessionScope


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Runtime:
    """A built agent that logs its release."""

    def __init__(self, name: str, log: list[str], resource: Resource | None = None) -> None:
        self.name = name
        self.log = log
        self.resource = resource
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True
        self.log.append(f"release {self.name}")


class Resource:
    """A session-scoped resource (an MCP connection, in the real thing)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def aclose(self) -> None:
        self.log.append(f"teardown {self.name}")


class Builder:
    """Builds `Runtime`s, counting builds; optionally opens a session resource, or waits on a gate."""

    def __init__(self, *, with_resource: bool = False) -> None:
        self.log: list[str] = []
        self.builds: list[str] = []
        self.opened: list[str] = []
        self.gate: asyncio.Event | None = None
        self.fail_next = False
        self.with_resource = with_resource

    def __call__(self, name: str):
        async def build(scope: SessionScope) -> Runtime:
            self.builds.append(name)
            if self.gate is not None:
                await self.gate.wait()
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("build failed")
            resource = None
            if self.with_resource:

                async def open_resource() -> Resource:
                    self.opened.append(scope.session_id)
                    return Resource(scope.session_id, self.log)

                resource = await scope.get_or_open("mcp", open_resource)
            return Runtime(name, self.log, resource)

        return build


def make_cache(max_entries: int = 10, ttl: float = 100.0, clock: Clock | None = None) -> AgentCache[Runtime]:
    return AgentCache(max_entries=max_entries, idle_ttl_seconds=ttl, clock=clock or Clock())


async def use(
    cache: AgentCache[Runtime], builder: Builder, session: str, agent: str = "a", signature: str = "s1"
):
    async with cache.use(session, agent, signature, builder(f"{session}/{agent}/{signature}")) as runtime:
        return runtime


async def test_same_signature_hits_and_a_changed_one_rebuilds() -> None:
    cache, builder = make_cache(), Builder()
    first = await use(cache, builder, "s")
    again = await use(cache, builder, "s")
    assert again is first
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)

    changed = await use(cache, builder, "s", signature="s2")
    await cache.drain()
    assert changed is not first
    assert first.closed, "the stale runtime is released"
    assert builder.builds == ["s/a/s1", "s/a/s2"]
    assert (cache.stats().size, cache.stats().misses, cache.stats().evictions) == (1, 2, 0)


async def test_lru_order_is_refreshed_by_hits() -> None:
    cache, builder = make_cache(max_entries=2), Builder()
    a = await use(cache, builder, "A")
    b = await use(cache, builder, "B")
    await use(cache, builder, "A")  # A is now the most recently used
    await use(cache, builder, "C")
    await cache.drain()
    assert b.closed and not a.closed
    assert cache.stats().evictions == 1
    assert await use(cache, builder, "A") is a


async def test_an_entry_mid_run_is_never_evicted(caplog: pytest.LogCaptureFixture) -> None:
    cache, builder = make_cache(max_entries=1), Builder()
    caplog.set_level(logging.WARNING, logger="agentmesh.executor.agents.cache")
    async with cache.use("A", "a", "s1", builder("A")) as a:
        async with cache.use("B", "a", "s1", builder("B")) as b:
            assert cache.stats().size == 2, "over the cap while both run"
            assert "over its cap" in caplog.text
        # B's run ended: the excess is A, still busy, and the newer B is not evicted in its place.
        await cache.drain()
        assert not b.closed and not a.closed
        assert cache.stats().size == 2
    # A's run ended: the least recently used entry, idle now, goes; the cache is back at its cap.
    await cache.drain()
    assert a.closed and not b.closed
    assert cache.stats().size == 1
    assert await use(cache, builder, "B") is b


async def test_over_its_cap_it_warns_once_then_at_most_every_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    cache, builder = make_cache(max_entries=1, clock=clock), Builder()
    caplog.set_level(logging.WARNING, logger="agentmesh.executor.agents.cache")

    def warnings() -> int:
        return sum("over its cap" in record.getMessage() for record in caplog.records)

    async with contextlib.AsyncExitStack() as runs:
        for number in range(5):  # five sessions mid-run at once: four over the cap
            await runs.enter_async_context(cache.use(f"s{number}", "a", "s1", builder(f"s{number}")))
        assert cache.stats().size == 5
        assert warnings() == 1, "one warning when it went over, not one per new session"
        clock.now += OVER_CAP_WARNING_SECONDS
        await runs.enter_async_context(cache.use("s5", "a", "s1", builder("s5")))
        assert warnings() == 2, "said again once the interval passed"
    await cache.drain()
    assert cache.stats().size == 1, "back at its cap once the runs ended"
    async with cache.use("t0", "a", "s1", builder("t0")), cache.use("t1", "a", "s1", builder("t1")):
        assert warnings() == 3, "going over again is news, whatever the interval"


async def test_a_random_mix_of_runs_keeps_the_eviction_rule() -> None:
    """Runs starting and ending in any order, signatures changing, sessions ending, sweeps: once a
    run ends no idle entry is left among the oldest beyond the cap (a hit reorders them and is
    looked at by the next end or insert), and no runtime mid-run is ever closed. (The cache counts
    its idle entries so as to look for them only while there are any: that count is checked
    against the entries themselves after every step, the one place a test reads them.)"""
    rng = random.Random(16)
    clock = Clock()
    cache, builder = make_cache(max_entries=4, ttl=50.0, clock=clock), Builder()
    open_runs: list[tuple[contextlib.AsyncExitStack, Runtime]] = []

    def check(*, settled: bool) -> None:
        entries = list(cache._entries.values())
        assert cache._idle == sum(entry.active == 0 for entry in entries)
        over = len(entries) - cache.max_entries
        if settled:
            assert all(entry.active for entry in entries[: max(over, 0)]), "an idle entry left past the cap"
        assert not any(runtime.closed for _, runtime in open_runs), "a runtime closed mid-run"

    for _ in range(600):
        action, settled = rng.random(), False
        if action < 0.45 or not open_runs:
            stack = contextlib.AsyncExitStack()
            session, signature = f"s{rng.randrange(8)}", f"v{rng.randrange(2)}"
            runtime = await stack.enter_async_context(
                cache.use(session, "a", signature, builder(f"{session}/{signature}"))
            )
            open_runs.append((stack, runtime))
        elif action < 0.9:
            stack, _ = open_runs.pop(rng.randrange(len(open_runs)))
            await stack.aclose()
            settled = True
        elif action < 0.95:
            cache.end_session(f"s{rng.randrange(8)}")
        else:
            clock.now += rng.choice([1.0, 60.0])
            cache.sweep()
        await asyncio.sleep(0)
        check(settled=settled)
    for stack, _ in open_runs:
        await stack.aclose()
    open_runs.clear()
    check(settled=True)
    assert cache.stats().size <= cache.max_entries


async def test_concurrent_inserts_settle_at_the_cap() -> None:
    cache, builder = make_cache(max_entries=3), Builder()
    builder.gate = asyncio.Event()

    async def run(session: str) -> Runtime:
        async with cache.use(session, "a", "s1", builder(session)) as runtime:
            await asyncio.sleep(0)
            return runtime

    tasks = [asyncio.create_task(run(f"s{i}")) for i in range(10)]
    await asyncio.sleep(0.01)
    builder.gate.set()
    runtimes = await asyncio.gather(*tasks)
    await cache.drain()
    stats = cache.stats()
    assert (stats.size, stats.misses, stats.evictions) == (3, 10, 7)
    assert sum(runtime.closed for runtime in runtimes) == 7


async def test_racing_requests_for_one_session_share_one_build() -> None:
    cache, builder = make_cache(), Builder()
    builder.gate = asyncio.Event()
    tasks = [asyncio.create_task(use(cache, builder, "s")) for _ in range(5)]
    await asyncio.sleep(0.01)
    builder.gate.set()
    runtimes = await asyncio.gather(*tasks)
    assert builder.builds == ["s/a/s1"]
    assert all(runtime is runtimes[0] for runtime in runtimes)
    assert (cache.stats().misses, cache.stats().hits) == (1, 4)


async def test_a_requester_that_gives_up_does_not_spoil_the_build_for_others() -> None:
    cache, builder = make_cache(), Builder()
    builder.gate = asyncio.Event()
    quitter = asyncio.create_task(use(cache, builder, "s"))
    stayer = asyncio.create_task(use(cache, builder, "s"))
    await asyncio.sleep(0.01)
    quitter.cancel()
    builder.gate.set()
    runtime = await stayer
    assert not runtime.closed
    assert await use(cache, builder, "s") is runtime
    assert builder.builds == ["s/a/s1"]


async def test_a_failed_build_fails_its_waiters_and_the_next_request_builds_again() -> None:
    cache, builder = make_cache(), Builder()
    builder.fail_next = True
    with pytest.raises(RuntimeError, match="build failed"):
        await use(cache, builder, "s")
    assert cache.stats().size == 0
    assert (await use(cache, builder, "s")).name == "s/a/s1"
    assert cache.stats().misses == 2


async def test_idle_entries_expire_after_the_ttl_but_busy_ones_stay() -> None:
    clock = Clock()
    cache, builder = make_cache(ttl=100, clock=clock), Builder()
    a = await use(cache, builder, "A")
    clock.now = 50
    b = await use(cache, builder, "B")
    async with cache.use("C", "a", "s1", builder("C")) as c:
        clock.now = 120
        assert cache.sweep() == 1
        await cache.drain()
        assert a.closed and not b.closed
        clock.now = 1000
        assert cache.sweep() == 1
        await cache.drain()
        assert b.closed and not c.closed, "a busy entry outlives the TTL"
    clock.now = 2000
    assert cache.sweep() == 1
    assert cache.stats().size == 0
    assert cache.stats().evictions == 3


async def test_eviction_releases_softly_and_the_session_keeps_its_resources() -> None:
    cache, builder = make_cache(max_entries=1), Builder(with_resource=True)
    first = await use(cache, builder, "S")
    await use(cache, builder, "T")  # evicts S's runtime (soft)
    await cache.drain()
    assert first.closed
    assert "teardown S" not in builder.log, "the session's resources outlive the eviction"
    rebuilt = await use(cache, builder, "S")
    assert rebuilt is not first
    assert rebuilt.resource is first.resource, "the rebuild reuses the session's connection"
    assert builder.opened == ["S", "T"]


async def test_ending_a_session_tears_everything_of_it_down() -> None:
    cache, builder = make_cache(), Builder(with_resource=True)
    runtime = await use(cache, builder, "S", agent="a")
    other = await use(cache, builder, "S", agent="b")
    kept = await use(cache, builder, "T")
    assert cache.end_session("S") == 2
    await cache.drain()
    assert runtime.closed and other.closed and not kept.closed
    assert builder.log.count("teardown S") == 1
    assert "teardown T" not in builder.log
    # The session may come back: it starts afresh.
    await use(cache, builder, "S")
    assert builder.opened == ["S", "T", "S"]


async def test_ending_a_session_mid_run_waits_for_the_run() -> None:
    cache, builder = make_cache(), Builder(with_resource=True)
    async with cache.use("S", "a", "s1", builder("S")) as runtime:
        assert cache.end_session("S") == 1
        await cache.drain()
        assert not runtime.closed and builder.log == [], "nothing is torn down under a running agent"
    await cache.drain()
    assert builder.log == ["release S", "teardown S"]


async def test_an_idle_session_is_torn_down_the_sweep_after_its_last_entry() -> None:
    clock = Clock()
    cache, builder = make_cache(ttl=100, clock=clock), Builder(with_resource=True)
    await use(cache, builder, "S")
    clock.now = 150
    cache.sweep()
    await cache.drain()
    assert builder.log == ["release S/a/s1"], (
        "the runtime goes softly: a comeback finds the session's connections"
    )
    assert cache.stats().sessions == 1
    clock.now = 160
    cache.sweep()
    await cache.drain()
    assert builder.log == ["release S/a/s1", "teardown S"]
    assert cache.stats().sessions == 0


async def test_closing_the_cache_tears_down_every_session() -> None:
    cache, builder = make_cache(), Builder(with_resource=True)
    await use(cache, builder, "S")
    await use(cache, builder, "T")
    await cache.aclose()
    assert sorted(builder.log) == ["release S/a/s1", "release T/a/s1", "teardown S", "teardown T"]
