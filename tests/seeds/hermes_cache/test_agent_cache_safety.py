"""Port of `hermes-agent-cache-tests.txt` (the Hermes gateway's `tests/gateway/test_agent_cache.py`),
part two: eviction never tears down an agent mid-turn, the cache under spillover with real agents,
and an idle-evicted session resuming with its state. Request for request and assertion for
assertion against agentmesh's `AgentCache`; only the fixtures are adapted (see conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from agentmesh.executor.agents.cache import AgentCache, SessionScope
from tests.seeds.hermes_cache.conftest import (
    AGENT,
    Clock,
    FakeAgent,
    Resource,
    cached,
    insert,
    make_cache,
    real_agent,
    running,
)

CACHE_LOGGER = "agentmesh.executor.agents.cache"


class TestAgentCacheActiveSafety:
    """Safety: eviction must not tear down agents currently mid-turn.

    Releasing an agent while it is still processing would pull its state from under the in-flight
    run. These tests pin that eviction skips any agent in use.
    """

    async def test_cap_skips_active_lru_entry(self) -> None:
        """Active LRU entry is skipped; cache stays over cap rather than compensating by evicting
        a newer entry.

        Rationale: evicting a more-recent entry just because the oldest slot is temporarily busy
        would punish the most recently-inserted session to protect one that happens to be
        mid-turn. Better to let the cache stay transiently over cap and re-check on the next insert.
        """
        cache = make_cache(max_entries=2)
        active, idle_a, idle_b = FakeAgent(), FakeAgent(), FakeAgent()
        # Insertion order: active (oldest), idle_a, idle_b; `active` is mid-turn — LRU, but protected.
        async with running(cache, "session-active", active):
            await insert(cache, "session-idle-a", idle_a)
            await insert(cache, "session-idle-b", idle_b)
            await cache.drain()

            # All three remain; no eviction ran, no cleanup dispatched.
            assert cached(cache, "session-active")
            assert cached(cache, "session-idle-a")
            assert cached(cache, "session-idle-b")
            assert not any(agent.released for agent in (active, idle_a, idle_b))

    async def test_cap_evicts_when_multiple_excess_and_some_inactive(self) -> None:
        """Mixed active/idle in the LRU excess window: only the idle ones go.

        With CAP=2 and 4 entries, excess=2 (the two oldest). If the oldest is active and the next
        is idle, we evict exactly one. Cache ends at CAP+1, which is still better than unbounded.
        """
        cache = make_cache(max_entries=2)
        oldest_active, idle_second, idle_third, idle_fourth = (FakeAgent() for _ in range(4))
        async with running(cache, "s1", oldest_active):  # oldest is mid-turn
            await insert(cache, "s2", idle_second)  # in excess window, idle
            await insert(cache, "s3", idle_third)
            await insert(cache, "s4", idle_fourth)

            # s1 protected (active), s2 evicted (idle + in excess window), s3 and s4 untouched
            # (outside excess window).
            assert cached(cache, "s1")
            assert not cached(cache, "s2")
            assert cached(cache, "s3")
            assert cached(cache, "s4")

    async def test_cap_leaves_cache_over_limit_if_all_active(self, caplog: pytest.LogCaptureFixture) -> None:
        """If every over-cap entry is mid-turn, the cache stays over cap.

        Better to temporarily exceed the cap than to crash an in-flight turn by tearing down its
        clients.
        """
        cache = make_cache(max_entries=1)
        a1, a2, a3 = FakeAgent(), FakeAgent(), FakeAgent()
        with caplog.at_level(logging.WARNING, logger=CACHE_LOGGER):
            # All three are mid-turn.
            async with running(cache, "s1", a1), running(cache, "s2", a2), running(cache, "s3", a3):
                await cache.drain()
                # Cache unchanged because eviction had to skip every candidate.
                assert cache.stats().size == 3
                # No release may have been scheduled.
                assert not any(agent.released for agent in (a1, a2, a3))
        # And we logged a warning so operators can see the condition.
        assert any("mid-turn" in r.message for r in caplog.records)

    async def test_cap_pending_sentinel_does_not_block_eviction(self) -> None:
        """An agent still being CONSTRUCTED (no instance yet) counts as 'not active': cached agents
        from other sessions can still be evicted safely."""
        cache = make_cache(max_entries=1)
        a1, a2 = FakeAgent(), FakeAgent()
        gate = asyncio.Event()

        async def slow_build(scope: SessionScope) -> FakeAgent:
            await gate.wait()
            return FakeAgent()

        async def being_created() -> None:
            async with cache.use("s3-being-created", AGENT, "sig", slow_build):
                pass

        # Another session is mid-creation, no real agent yet.
        creating = asyncio.create_task(being_created())
        await asyncio.sleep(0)
        await insert(cache, "s1", a1)
        await insert(cache, "s2", a2)

        assert not cached(cache, "s1")  # evicted normally
        assert cached(cache, "s2")
        gate.set()
        await creating

    async def test_idle_sweep_skips_active_agent(self) -> None:
        """Idle-TTL sweep must not tear down an active agent even if 'stale'."""
        clock = Clock()
        cache = make_cache(ttl=0.01, clock=clock)
        old_but_active = FakeAgent()
        async with running(cache, "s1", old_but_active):
            clock.now += 10.0
            evicted = cache.sweep()
            await cache.drain()
            assert evicted == 0
            assert cached(cache, "s1")
            assert not old_but_active.released

    async def test_eviction_does_not_close_active_agent_client(self) -> None:
        """Evicting while an agent is mid-turn does NOT drop its client.

        If eviction fired while an agent was mid-turn and released it, the next model call inside
        the run would find no client. With the active-agent skip, the client stays intact.
        """
        cache = make_cache(max_entries=1)
        active = FakeAgent("active")
        idle = FakeAgent("idle")
        async with running(cache, "active-session", active):
            await insert(cache, "idle-session", idle)
            # Let any eviction cleanup drain.
            await cache.drain()

            # The ACTIVE agent's client must still be usable.
            assert active.client is not None, (
                "Active agent's client was closed by eviction — "
                "running turn would crash on its next model call."
            )


class TestAgentCacheSpilloverLive:
    """Live: fill the cache with real agents and stress it."""

    async def test_fill_to_cap_then_spillover(self) -> None:
        """Fill to cap with real agents, insert one more, oldest evicted."""
        cap = 8
        cache = make_cache(max_entries=cap)
        agents = [await real_agent() for _ in range(cap)]
        for i, agent in enumerate(agents):
            await insert(cache, f"s{i}", agent)
        assert cache.stats().size == cap

        # Spillover insertion.
        newcomer = await real_agent()
        await insert(cache, "new", newcomer)

        # Oldest (s0) evicted, cap still CAP.
        assert not cached(cache, "s0")
        assert cached(cache, "new")
        assert cache.stats().size == cap
        await cache.aclose()

    async def test_spillover_all_active_keeps_cache_over_cap(self, caplog: pytest.LogCaptureFixture) -> None:
        """Every slot active: cache goes over cap, no one gets torn down."""
        cap = 4
        cache = make_cache(max_entries=cap)
        agents = [await real_agent() for _ in range(cap)]
        newcomer = await real_agent()
        async with contextlib.AsyncExitStack() as mid_turn:
            for i, agent in enumerate(agents):
                await mid_turn.enter_async_context(running(cache, f"s{i}", agent))  # every session mid-turn
            with caplog.at_level(logging.WARNING, logger=CACHE_LOGGER):
                await insert(cache, "new", newcomer)

            assert cache.stats().size == cap + 1  # temporarily over cap
            # All existing agents still usable.
            for i, agent in enumerate(agents):
                assert (await insert(cache, f"s{i}", await real_agent())) is agent, (
                    f"s{i} got released while active!"
                )
                assert agent.models is not None and agent.models.for_run() is not None
        # And we warned operators.
        assert any("mid-turn" in r.message for r in caplog.records)
        await cache.aclose()

    async def test_concurrent_inserts_settle_at_cap(self) -> None:
        """Many tasks inserting at once end with exactly CAP entries."""
        cap = 16
        cache = make_cache(max_entries=cap)
        n_workers = 8
        per_worker = 20  # 8 * 20 = 160 inserts into a 16-slot cache

        async def worker(tid: int) -> None:
            for j in range(per_worker):
                await insert(cache, f"t{tid}-s{j}", await real_agent())

        await asyncio.wait_for(asyncio.gather(*(worker(t) for t in range(n_workers))), timeout=30)
        # Let the releases settle.
        await cache.drain()

        assert cache.stats().size == cap, (
            f"Expected exactly {cap} entries after concurrent inserts, got {cache.stats().size}."
        )
        await cache.aclose()

    async def test_evicted_session_next_turn_gets_fresh_agent(self) -> None:
        """After eviction, the same session can insert a fresh agent: the evicted session sends
        another message, which builds a new agent and re-enters the cache."""
        cap = 2
        cache = make_cache(max_entries=cap)
        a0, a1 = await real_agent(), await real_agent()
        await insert(cache, "sA", a0)
        await insert(cache, "sB", a1)

        # 3rd session forces sA (oldest) out.
        a2 = await real_agent()
        await insert(cache, "sC", a2)
        assert not cached(cache, "sA")
        # Let the eviction's release run.
        await cache.drain()

        # Now sA's user sends another message → a fresh agent goes in.
        a0_new = await real_agent()
        assert await insert(cache, "sA", a0_new) is a0_new
        assert cached(cache, "sA")
        assert await insert(cache, "sA", await real_agent()) is a0_new  # the new one, not stale
        # Fresh agent is usable.
        assert a0_new.models is not None and a0_new.models.for_run() is not None
        await cache.aclose()


class TestAgentCacheIdleResume:
    """An idle-TTL-evicted session resumes cleanly with its state.

    A user leaves a session open for hours; the idle TTL evicts their cached agent. They come
    back and send a message. The agent built for the same session must inherit what the session
    keeps (its connections: the session's scope) — the conversation history is memory's, outside
    the cache. The ONLY thing that resets is the agent itself (rebuilt fresh).
    """

    async def test_release_clients_does_not_touch_process_registry(self) -> None:
        """Evicting an agent (a soft release) must not end the session's background processes."""
        cache = make_cache(max_entries=1)
        kill_all_calls: list[str] = []
        agent = await _agent_with(cache, "idle-resume-test-session", [Resource("processes", kill_all_calls)])
        await insert(cache, "other-session", FakeAgent())  # evicts it: the soft release
        await cache.drain()

        assert not cached(cache, "idle-resume-test-session") and agent is not None
        assert kill_all_calls == [], (
            f"the release ended the session's processes — would kill user's bg processes on cache eviction. "
            f"Calls: {kill_all_calls}"
        )

    async def test_release_clients_does_not_touch_terminal_or_browser(self) -> None:
        """A soft release must not tear down the session's terminal sandbox or browser."""
        cache = make_cache(max_entries=1)
        vm_calls: list[str] = []
        browser_calls: list[str] = []
        await _agent_with(
            cache, "idle-resume-test-2", [Resource("terminal", vm_calls), Resource("browser", browser_calls)]
        )
        await insert(cache, "other-session", FakeAgent())
        await cache.drain()

        assert vm_calls == [], (
            f"release tore down terminal sandbox — user's cwd, env, and bg shells would be gone on resume. "
            f"Calls: {vm_calls}"
        )
        assert browser_calls == [], (
            f"release tore down browser session — user's open tabs and cookies gone on resume. "
            f"Calls: {browser_calls}"
        )

    async def test_release_clients_closes_llm_client(self) -> None:
        """The release IS expected to drop the agent itself (and with it its model client)."""
        cache = make_cache(max_entries=1)
        agent = FakeAgent()
        await insert(cache, "s", agent)
        assert agent.client is not None  # built with one
        await insert(cache, "other-session", FakeAgent())  # evicts it
        await cache.drain()
        # Post-release: client reference is dropped (memory freed).
        assert agent.client is None

    async def test_close_vs_release_full_teardown_difference(self) -> None:
        """Ending a session tears its state down; evicting its agent does not.

        This pins the semantic contract: the session's end (reset, expiry) is a full teardown
        (the session is done); cache eviction is soft (the session may resume).
        """
        cache = make_cache(max_entries=1)
        vm_calls: list[str] = []
        # Agent A: evicted from cache (soft) — terminal survives.
        await _agent_with(cache, "soft-session", [Resource("soft-session", vm_calls)])
        # Agent B: session ended (hard) — terminal torn down.
        await _agent_with(cache, "hard-session", [Resource("hard-session", vm_calls)])  # evicts A
        cache.end_session("hard-session")
        await cache.drain()

        # Only agent B's session appears in the teardowns.
        assert "hard-session" in vm_calls
        assert "soft-session" not in vm_calls

    async def test_idle_evicted_session_rebuild_inherits_task_id(self) -> None:
        """After idle-TTL eviction, a fresh agent for the same session gets the same session
        state — so what persisted across eviction is reachable through the new agent."""
        clock = Clock()
        cache = make_cache(ttl=0.01, clock=clock)
        session_id = "long-lived-user-session"
        teardowns: list[str] = []
        # An agent representing a stale (idle) session.
        old = await _agent_with(cache, session_id, [Resource("terminal", teardowns)])
        clock.now += 10.0  # force idle

        # The idle-TTL sweep fires.
        cache.sweep()
        assert not cached(cache, session_id)
        # Wait for the release to finish.
        await cache.drain()
        # Old agent is released (soft cleanup fired); its session's terminal is not.
        assert old.released and teardowns == []

        # User comes back — new agent built for the SAME session.
        new_agent = await _agent_with(cache, session_id, [Resource("terminal", teardowns)])
        # Same session means the same state routed to the new agent.
        assert new_agent is not old
        assert new_agent.resources == old.resources
        # And it is a fresh, working agent.
        assert new_agent.client is not None
        await cache.aclose()


class _WithResources(FakeAgent):
    """An agent built in a session holding the session's resources (opened once per session)."""

    def __init__(self, resources: list[object]) -> None:
        super().__init__()
        self.resources = resources


async def _agent_with(cache: AgentCache[object], session: str, resources: list[Resource]) -> _WithResources:
    async def build(scope: SessionScope) -> _WithResources:
        opened = [await scope.get_or_open(r.name, lambda r=r: _ready(r)) for r in resources]
        return _WithResources(opened)

    async with cache.use(session, AGENT, "sig", build) as agent:
        return agent  # type: ignore[return-value]


async def _ready(resource: Resource) -> Resource:
    return resource
