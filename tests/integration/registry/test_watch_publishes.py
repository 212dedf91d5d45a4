"""The registry's rules publish what they commit to the agent watch (WatchAgents), on every store
(in memory, SQLite, PostgreSQL): a pause, resume and termination with the agent's new status, a
config update as a spec change, an agent type or project update as a reset — and nothing for a
change that was refused (no commit, no push)."""

from __future__ import annotations

import pytest

from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.agents.watch import AgentChange, AgentWatch, WatchBatch
from agentmesh.registry.models import AgentConfig, AgentStatus, AgentTypeFields, ProjectFields
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.runs.executors import ExecutorPool
from agentmesh.registry.store import RegistryStore
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import Principal
from tests.integration.registry.test_store_contract import _world


async def _next(watcher) -> WatchBatch:  # type: ignore[no-untyped-def]
    batch = await watcher.take()
    assert batch is not None
    return batch


async def test_committed_changes_are_published_and_refused_ones_are_not(
    registry_store: RegistryStore,
) -> None:
    owner, agent_type, project, agent = await _world(registry_store)
    watch = AgentWatch()
    executors = ExecutorPool(registry_store, executor_ttl_seconds=30)
    registry = AgentRegistry(
        registry_store, page_tokens=PageTokens("s" * 32), executors=executors, watch=watch
    )
    projects = ProjectRegistry(registry_store, page_tokens=PageTokens("s" * 32), watch=watch)
    principal = Principal(user_id=owner)
    async with watch.watch() as watcher:
        assert (await _next(watcher)).reset

        await registry.pause_agent(principal, project.id, agent.id)
        await registry.resume_agent(principal, project.id, agent.id)
        await registry.update_agent(
            principal, project.id, agent.id, AgentConfig(instructions="new"), ["config"]
        )
        batch = await _next(watcher)
        assert [(c.agent_id, c.status, c.spec_changed) for c in batch.changes] == [
            (agent.id, AgentStatus.PAUSED, False),
            (agent.id, AgentStatus.IDLE, False),
            (agent.id, None, True),
        ]

        changed_type = AgentTypeFields(name=agent_type.name, description="changed", primary_model="mock")
        await registry.update_agent_type(agent_type.id, changed_type, ["description", "primary_model"])
        assert (await _next(watcher)).reset
        await projects.update(principal, project.id, ProjectFields(name="renamed"), ["name"])
        assert (await _next(watcher)).reset

        await registry.terminate_agent(principal, project.id, agent.id)
        batch = await _next(watcher)
        assert [(c.agent_id, c.status) for c in batch.changes] == [(agent.id, AgentStatus.TERMINATED)]
        with pytest.raises(DomainError):  # refused: nothing committed, nothing pushed
            await registry.resume_agent(principal, project.id, agent.id)
        watch.changed(AgentChange("sentinel", spec_changed=True))  # published here, after the refusal
        assert [c.agent_id for c in (await _next(watcher)).changes] == ["sentinel"]
