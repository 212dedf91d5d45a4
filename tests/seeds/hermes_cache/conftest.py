"""Fixtures for the port of the Hermes gateway's agent-cache tests.

Hermes keeps `GatewayRunner._agent_cache`, a dict `{session_key: (AIAgent, signature)}` guarded by
a lock; agentmesh's executor keeps `AgentCache`, keyed by (session, agent). What the original
suite does to its dict, the port does through the cache's interface:

- `_make_runner()` → `make_cache()`: an `AgentCache` with a cap, an idle TTL and a clock the test
  controls (`Clock`);
- `GatewayRunner._agent_config_signature(model, runtime, toolsets, instructions)` →
  `config_signature(...)`: an agent spec with that model on that provider (endpoint and key from
  `runtime`), the toolsets' tools and the instructions, signed by the executor's `AgentBuilder`;
- `AIAgent(...)` → `real_agent(...)`: an `AgentRuntime` really built by the `AgentBuilder` (its
  model client made; no model call);
- storing `(agent, sig)` in the dict → `insert(cache, key, agent, sig)`, through `AgentCache.use`;
  reading it back → `cached(...)` / `order(...)`;
- `_running_agents[key] = agent` (mid-turn) → `running(cache, key, agent)`: the entry in use;
- `_enforce_agent_cache_cap()` / `_evict_cached_agent()` / `_sweep_idle_cached_agents()` → what
  the cache does on every insert and release / `end_session()` / `sweep()`;
- `release_clients()` (soft, on eviction) / `close()` (hard, at session expiry) → an evicted
  runtime's release, the session's scope kept / `end_session()`, the session's scope torn down;
  the terminal, browser and background processes a session keeps → resources in its
  `SessionScope` (`Resource`);
- a `MagicMock` agent → `FakeAgent`, which notes its release; `_last_activity_ts` → the clock at
  the entry's last use;
- threads → asyncio tasks; sleeping until cleanup threads ran → `await cache.drain()`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import SecretStr

from agentmesh.executor.agents.cache import AgentCache, SessionScope
from agentmesh.executor.agents.runtime import AgentBuilder, AgentRuntime
from agentmesh.executor.providers.factory import ModelFactory
from agentmesh.executor.settings import ExecutorSettings, ProviderSettings
from agentmesh.registry.v1 import resources_pb2

AGENT = "assistant"
# Hermes' platform toolsets, as agentmesh tool sets.
TOOLSETS = {"hermes-telegram": ["get_current_time"], "hermes-discord": ["get_current_time", "exit_loop"]}
OPENROUTER = {"api_key": "test", "base_url": "https://openrouter.ai/api/v1", "provider": "openrouter"}


class Clock:
    """Seconds, as the test says."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeAgent:
    """A lightweight stand-in for a built agent: its client is dropped when it is released."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.client: object | None = object()
        self.released = False

    async def aclose(self) -> None:
        self.released = True
        self.client = None


class Resource:
    """Something a session keeps across its agents' rebuilds (a terminal sandbox, a browser, an
    MCP connection): torn down only when the session ends."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self._log = log

    async def aclose(self) -> None:
        self._log.append(self.name)


def make_cache(max_entries: int = 256, ttl: float = 3600.0, clock: Clock | None = None) -> AgentCache[Any]:
    return AgentCache(max_entries=max_entries, idle_ttl_seconds=ttl, clock=clock or Clock())


def built(agent: Any) -> Callable[[SessionScope], Awaitable[Any]]:
    async def build(scope: SessionScope) -> Any:
        return agent

    return build


async def insert(cache: AgentCache[Any], key: str, agent: Any, sig: str = "sig") -> Any:
    """Puts `agent` in the cache for session `key` (or finds the one there under `sig`)."""
    async with cache.use(key, AGENT, sig, built(agent)) as value:
        return value


@contextlib.asynccontextmanager
async def running(cache: AgentCache[Any], key: str, agent: Any, sig: str = "sig") -> AsyncIterator[Any]:
    """The session's agent mid-turn (inserted first when missing)."""
    async with cache.use(key, AGENT, sig, built(agent)) as value:
        yield value


def cached(cache: AgentCache[Any], key: str) -> bool:
    return (key, AGENT) in cache


def order(cache: AgentCache[Any]) -> list[str]:
    """The cached sessions, least recently used first."""
    return [session for session, _ in cache.keys()]  # noqa: SIM118 (a list, not a dict)


def executor_settings(runtime: dict[str, str]) -> ExecutorSettings:
    provider = ProviderSettings(base_url=runtime["base_url"], api_key=SecretStr(runtime["api_key"]))
    return ExecutorSettings(providers={runtime["provider"]: provider})


def agent_spec(
    model: str, provider: str, toolsets: list[str], instructions: str = ""
) -> resources_pb2.AgentSpec:
    return resources_pb2.AgentSpec(
        agent=resources_pb2.Agent(id="agent-1", name=AGENT, project_id="p1"),
        project_slug="p",
        kind=resources_pb2.AGENT_KIND_LLM,
        instructions=instructions,
        primary_model=f"{provider}/{model}",
        tools=[tool for toolset in toolsets for tool in TOOLSETS[toolset]],
        max_steps=5,
    )


async def config_signature(
    model: str, runtime: dict[str, str], toolsets: list[str], instructions: str
) -> str:
    """Hermes' `_agent_config_signature`: everything that changes the agent's behaviour."""
    builder = AgentBuilder(ModelFactory(executor_settings(runtime)))
    signature, _ = await builder.plan(agent_spec(model, runtime["provider"], toolsets, instructions))
    return signature


async def real_agent(
    model: str = "anthropic/claude-sonnet-4",
    *,
    runtime: dict[str, str] = OPENROUTER,
    toolsets: tuple[str, ...] = ("hermes-telegram",),
    scope: SessionScope | None = None,
    params: dict[str, Any] | None = None,
    instructions: str = "",
) -> AgentRuntime:
    """Hermes' `AIAgent(...)`: a runtime really built (model client included), in `scope`."""
    builder = AgentBuilder(ModelFactory(executor_settings(runtime)))
    spec = agent_spec(model, runtime["provider"], list(toolsets), instructions)
    if params:
        spec.model_params.update(params)
    signature, plan = await builder.plan(spec)
    return await builder.build(spec, signature, plan, scope or SessionScope("telegram:12345"))
