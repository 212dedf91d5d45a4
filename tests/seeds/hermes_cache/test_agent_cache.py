"""Port of `hermes-agent-cache-tests.txt` (the Hermes gateway's `tests/gateway/test_agent_cache.py`),
part one: the config signature, the cache's lifecycle and its bounded growth. Request for request
and assertion for assertion against agentmesh's `AgentCache` and `AgentBuilder`; only the fixtures
are adapted (see conftest.py). Part two is test_agent_cache_safety.py.

Verifies that the agent cache correctly:
- reuses agents across messages (same config → same instance)
- rebuilds agents when config changes (model, provider, toolsets)
- updates per-message settings (reasoning) without rebuilding
- evicts on session reset
- preserves the frozen system prompt across turns
"""

from __future__ import annotations

import asyncio

from agentmesh.executor.agents.cache import SessionScope
from agentmesh.executor.providers.base import Message
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.seeds.hermes_cache.conftest import (
    AGENT,
    Clock,
    FakeAgent,
    Resource,
    cached,
    config_signature,
    insert,
    make_cache,
    order,
    real_agent,
)

PERSONA = "You are a test agent on Telegram."


class TestAgentConfigSignature:
    """Config signature produces stable, distinct keys."""

    async def test_same_config_same_signature(self) -> None:
        runtime = {
            "api_key": "sk-test12345678",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
            "api_mode": "chat_completions",
        }
        sig1 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        sig2 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        assert sig1 == sig2

    async def test_model_change_different_signature(self) -> None:
        runtime = {
            "api_key": "sk-test12345678",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
        }
        sig1 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        sig2 = await config_signature("claude-opus-4.6", runtime, ["hermes-telegram"], "")
        assert sig1 != sig2

    async def test_same_token_prefix_different_full_token_changes_signature(self) -> None:
        """Tokens sharing a JWT-style prefix must not collide."""
        rt1 = {
            "api_key": "eyJhbGci.token-for-account-a",
            "base_url": "https://chatgpt.com/backend-api/codex",
            "provider": "openai-codex",
            "api_mode": "codex_responses",
        }
        rt2 = {
            "api_key": "eyJhbGci.token-for-account-b",
            "base_url": "https://chatgpt.com/backend-api/codex",
            "provider": "openai-codex",
            "api_mode": "codex_responses",
        }
        assert rt1["api_key"][:8] == rt2["api_key"][:8]
        sig1 = await config_signature("gpt-5.3-codex", rt1, ["hermes-telegram"], "")
        sig2 = await config_signature("gpt-5.3-codex", rt2, ["hermes-telegram"], "")
        assert sig1 != sig2

    async def test_provider_change_different_signature(self) -> None:
        rt1 = {
            "api_key": "sk-test12345678",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
        }
        rt2 = {"api_key": "sk-test12345678", "base_url": "https://api.anthropic.com", "provider": "anthropic"}
        sig1 = await config_signature("claude-sonnet-4", rt1, ["hermes-telegram"], "")
        sig2 = await config_signature("claude-sonnet-4", rt2, ["hermes-telegram"], "")
        assert sig1 != sig2

    async def test_toolset_change_different_signature(self) -> None:
        runtime = {
            "api_key": "sk-test12345678",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
        }
        sig1 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        sig2 = await config_signature("claude-sonnet-4", runtime, ["hermes-discord"], "")
        assert sig1 != sig2

    async def test_reasoning_not_in_signature(self) -> None:
        """Reasoning config is set per-message, not part of the signature."""
        runtime = {
            "api_key": "sk-test12345678",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
        }
        # Same config — signature should be identical regardless of what reasoning the caller
        # might send with a message (it is not passed in)
        sig1 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        sig2 = await config_signature("claude-sonnet-4", runtime, ["hermes-telegram"], "")
        assert sig1 == sig2


class TestAgentCacheLifecycle:
    """End-to-end cache behavior with real agent construction."""

    async def test_cache_hit_returns_same_agent(self) -> None:
        """Second message with same config reuses the cached agent instance."""
        cache = make_cache()
        session_key = "telegram:12345"
        runtime = {
            "api_key": "test",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
            "api_mode": "chat_completions",
        }
        sig = await config_signature("anthropic/claude-sonnet-4", runtime, ["hermes-telegram"], "")
        # First message — create and cache
        agent1 = await real_agent("anthropic/claude-sonnet-4", runtime=runtime)
        await insert(cache, session_key, agent1, sig)
        # Second message — cache hit
        cached_agent = await insert(cache, session_key, await real_agent(runtime=runtime), sig)
        assert cached_agent is not None
        assert cache.stats().hits == 1
        assert cached_agent is agent1  # same instance

    async def test_cache_miss_on_model_change(self) -> None:
        """Model change produces different signature → cache miss."""
        cache = make_cache()
        session_key = "telegram:12345"
        runtime = {
            "api_key": "test",
            "base_url": "https://openrouter.ai/api/v1",
            "provider": "openrouter",
            "api_mode": "chat_completions",
        }
        old_sig = await config_signature("anthropic/claude-sonnet-4", runtime, ["hermes-telegram"], "")
        agent1 = await real_agent("anthropic/claude-sonnet-4", runtime=runtime)
        await insert(cache, session_key, agent1, old_sig)
        # New model → different signature
        new_sig = await config_signature("anthropic/claude-opus-4.6", runtime, ["hermes-telegram"], "")
        assert new_sig != old_sig
        assert agent1.signature == old_sig != new_sig  # signature mismatch → a new agent is built
        agent2 = await real_agent("anthropic/claude-opus-4.6", runtime=runtime)
        assert await insert(cache, session_key, agent2, new_sig) is agent2
        assert cache.stats().misses == 2

    async def test_evict_on_session_reset(self) -> None:
        """Resetting the session removes the entry."""
        cache = make_cache()
        session_key = "telegram:12345"
        agent = await real_agent()
        await insert(cache, session_key, agent, "sig123")
        cache.end_session(session_key)
        assert not cached(cache, session_key)

    async def test_evict_does_not_affect_other_sessions(self) -> None:
        """Evicting one session leaves other sessions cached."""
        cache = make_cache()
        await insert(cache, "session-A", FakeAgent("agent-A"), "sig-A")
        await insert(cache, "session-B", FakeAgent("agent-B"), "sig-B")
        cache.end_session("session-A")
        assert not cached(cache, "session-A")
        assert cached(cache, "session-B")

    async def test_reasoning_config_updates_in_place(self) -> None:
        """Reasoning can be set per message on a cached agent without eviction."""
        async with FakeOpenAI() as server:
            server.script("claude-sonnet-4", Reply(text="ok"))
            runtime = {"api_key": "test", "base_url": server.base_url, "provider": "openrouter"}
            agent = await real_agent(
                "claude-sonnet-4",
                runtime=runtime,
                params={"reasoning_effort": "medium"},
                instructions=PERSONA,
            )
            # Simulate per-message reasoning update
            assert agent.models is not None
            model = agent.models.for_run({"reasoning_effort": "high"})
            async for _ in model.stream([Message("user", "hi")], []):
                pass
            assert server.requests[-1].body["reasoning_effort"] == "high"

        # System prompt should not be affected by reasoning change
        prompt1 = agent.system_prompt(as_sub_agent=False)
        agent.models.for_run({"reasoning_effort": "low"})
        prompt2 = agent.system_prompt(as_sub_agent=False)
        assert prompt1 is prompt2  # same object — not invalidated by reasoning change

    async def test_system_prompt_frozen_across_cache_reuse(self) -> None:
        """The cached agent's system prompt stays identical across turns."""
        cache = make_cache()
        agent = await real_agent(instructions=PERSONA)
        # Build system prompt (the first turn)
        prompt1 = (await insert(cache, "telegram:12345", agent)).system_prompt(as_sub_agent=False)
        # Second turn — prompt should be frozen
        prompt2 = (await insert(cache, "telegram:12345", await real_agent())).system_prompt(
            as_sub_agent=False
        )
        assert prompt1 is prompt2  # same object, not rebuilt

    async def test_callbacks_update_without_cache_eviction(self) -> None:
        """Per-message state (each run's model, with its settings) is set without eviction."""
        cache = make_cache()
        agent = await insert(cache, "telegram:12345", await real_agent())
        # Set per-message state like the executor does per message
        cb1 = agent.models.for_run({"temperature": 0.1})
        cb2 = agent.models.for_run({"temperature": 0.2})
        assert cb1 is not cb2
        # Update for next message
        cb3 = agent.models.for_run({"temperature": 0.3})
        assert cb3 is not cb1
        assert await insert(cache, "telegram:12345", await real_agent()) is agent
        assert cache.stats().evictions == 0


class TestAgentCacheBoundedGrowth:
    """LRU cap and idle-TTL eviction prevent unbounded cache growth."""

    async def test_cap_evicts_lru_when_exceeded(self) -> None:
        """Inserting past the cap pops the oldest entry."""
        cache = make_cache(max_entries=3)
        for i in range(3):
            await insert(cache, f"s{i}", FakeAgent(), f"sig{i}")
        # Insert a 4th — oldest (s0) must be evicted.
        await insert(cache, "s3", FakeAgent(), "sig3")
        assert not cached(cache, "s0")
        assert cached(cache, "s3")
        assert cache.stats().size == 3

    async def test_cap_respects_move_to_end(self) -> None:
        """Entries refreshed by a hit are NOT evicted as 'oldest'."""
        cache = make_cache(max_entries=3)
        for i in range(3):
            await insert(cache, f"s{i}", FakeAgent(), f"sig{i}")
        # Touch s0 — it is now MRU, so s1 becomes LRU.
        await insert(cache, "s0", FakeAgent(), "sig0")
        await insert(cache, "s3", FakeAgent(), "sig3")
        assert cached(cache, "s0")  # rescued by the hit
        assert not cached(cache, "s1")  # now oldest → evicted
        assert cached(cache, "s3")

    async def test_cap_triggers_cleanup_thread(self) -> None:
        """An evicted agent is released softly: the session's own state (its scope) is not torn
        down — cache eviction must not tear down what the session keeps."""
        cache = make_cache(max_entries=1)
        cleanup_calls: list[str] = []
        old_agent = FakeAgent("old")
        new_agent = FakeAgent("new")

        async def build_old(scope: SessionScope) -> FakeAgent:
            await scope.get_or_open("terminal", lambda: _opened(Resource("old terminal", cleanup_calls)))
            return old_agent

        async with cache.use("old", AGENT, "sig_old", build_old):
            pass
        await insert(cache, "new", new_agent, "sig_new")
        await cache.drain()

        assert old_agent.released
        assert not new_agent.released
        # The hard-cleanup path must NOT have fired — that's for the session's end only.
        assert cleanup_calls == []

    async def test_idle_ttl_sweep_evicts_stale_agents(self) -> None:
        """sweep() removes agents idle past the TTL."""
        clock = Clock()
        cache = make_cache(ttl=0.05, clock=clock)
        stale = FakeAgent("stale")
        await insert(cache, "stale", stale, "s2")
        clock.now += 10.0
        fresh = FakeAgent("fresh")
        await insert(cache, "fresh", fresh, "s1")

        evicted = cache.sweep()
        assert evicted == 1
        assert not cached(cache, "stale")
        assert cached(cache, "fresh")

    async def test_idle_sweep_skips_agents_without_activity_ts(self) -> None:
        """An agent exposing no activity of its own is judged by the cache's clock: not idle yet,
        it is left alone (defensive)."""
        cache = make_cache(ttl=0.01)

        class NoActivity:
            async def aclose(self) -> None: ...

        await insert(cache, "s", NoActivity(), "sig")
        assert cache.sweep() == 0
        assert cached(cache, "s")

    async def test_plain_dict_cache_is_tolerated(self) -> None:
        """Inserting below the cap never evicts."""
        cache = make_cache()
        for i in range(200):
            await insert(cache, f"s{i}", FakeAgent(), f"sig{i}")
        # No crash, no eviction.
        assert cache.stats().size == 200
        assert cache.stats().evictions == 0

    async def test_main_lookup_updates_lru_order(self) -> None:
        """A cache hit through the main lookup refreshes LRU position."""
        cache = make_cache()
        a0, a1, a2 = FakeAgent(), FakeAgent(), FakeAgent()
        await insert(cache, "s0", a0, "sig0")
        await insert(cache, "s1", a1, "sig1")
        await insert(cache, "s2", a2, "sig2")
        # What a message does on a cache hit.
        assert await insert(cache, "s0", FakeAgent(), "sig0") is a0
        # After the hit, insertion order should be s1, s2, s0.
        assert order(cache) == ["s1", "s2", "s0"]


async def _opened(resource: Resource) -> Resource:
    await asyncio.sleep(0)
    return resource
