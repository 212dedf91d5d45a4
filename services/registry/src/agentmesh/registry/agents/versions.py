"""Agent versions: every create and change of an agent, and every change of its type, snapshots
what the agent's runs use (its type as it now is, and its config overrides) as a new numbered,
immutable version; a session's runs of an agent use the version their first run used until the
session is moved (`docs/sessions.md`, Agent versions).

These functions work inside the caller's write transaction, which holds the agent's (or its
type's) row, so numbers are taken in turn. A version is resolved into a spec exactly as the
agent is (`lifecycle.resolve`, with the version's type and config in place of the current ones):
status, usage and the project are the agent's now, whatever the version.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentmesh.registry.errors import AgentTypeNotFound
from agentmesh.registry.mcp_servers.registry import masked_type
from agentmesh.registry.models import Agent, AgentType, AgentVersion, JsonValue, Model
from agentmesh.registry.store import RegistryStore, StoreTransaction


class FieldChange(Model):
    """One field that differs between two versions of an agent: its value in each (None: not set)."""

    field: str
    before: JsonValue = None
    after: JsonValue = None


def as_of(agent: Agent, version: AgentVersion) -> tuple[Agent, AgentType]:
    """The agent and its type as the version has them (status and usage as they are now)."""
    return agent.model_copy(update={"config": version.config}), version.agent_type


async def record_version(
    tx: StoreTransaction,
    agent: Agent,
    agent_type: AgentType,
    *,
    by: str,
    now: datetime,
    before: tuple[Agent, AgentType] | None = None,
) -> AgentVersion | None:
    """Records the agent as it now is (with `agent_type`) as its next version, unless its latest
    version is that already (None then). An agent that has none yet (spawned before versions were
    kept) first gets one of how it was `before` the change, dated at its creation."""
    latest = await tx.get_agent_version(agent.id)
    if latest is None and before is not None:
        latest = await tx.insert_agent_version(_snapshot(*before, number=1, by="", at=before[0].created_at))
    if latest is not None and (latest.agent_type, latest.config) == (agent_type, agent.config):
        return None
    number = latest.number + 1 if latest else 1
    return await tx.insert_agent_version(_snapshot(agent, agent_type, number=number, by=by, at=now))


async def current_version(tx: StoreTransaction, agent: Agent, agent_type: AgentType) -> AgentVersion:
    """The agent's latest version; one made of how it is now when it has none yet."""
    latest = await tx.get_agent_version(agent.id)
    if latest is not None:
        return latest
    return await tx.insert_agent_version(_snapshot(agent, agent_type, number=1, by="", at=agent.created_at))


async def session_version(store: RegistryStore, agent: Agent, session_id: str, now: datetime) -> AgentVersion:
    """The version the session's runs of the agent use: the one its first run pinned, or (this
    being its first) its latest, pinned now. Two first runs at once pin one version."""
    async with store.read() as tx:
        pinned = await tx.session_version(agent.id, session_id)
        version = await tx.get_agent_version(agent.id, pinned) if pinned else None
    if version is not None:
        return version
    async with store.write() as tx:
        agent_type = await tx.get_agent_type(type_id=agent.agent_type_id)
        if agent_type is None:
            raise AgentTypeNotFound("agent type not found")
        latest = await current_version(tx, agent, agent_type)
        number = await tx.pin_session(agent.project_id, agent.id, session_id, latest.number, now, move=False)
        version = latest if number == latest.number else await tx.get_agent_version(agent.id, number)
    assert version is not None
    return version


def differences(before: AgentVersion, after: AgentVersion) -> list[FieldChange]:
    """The fields that differ between two versions, named `config.<field>` (an override; null when
    not set) and `agent_type.<field>`, in name order; MCP server secrets masked."""
    old, new = _fields(before), _fields(after)
    return [
        FieldChange(field=name, before=old.get(name), after=new.get(name))
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def _fields(version: AgentVersion) -> dict[str, Any]:
    kept = masked_type(version.agent_type).model_dump(mode="json", exclude={"id", "created_at", "updated_at"})
    config = version.config.model_dump(mode="json", exclude_none=True)
    return {f"agent_type.{k}": v for k, v in kept.items()} | {f"config.{k}": v for k, v in config.items()}


def _snapshot(agent: Agent, agent_type: AgentType, *, number: int, by: str, at: datetime) -> AgentVersion:
    return AgentVersion(
        agent_id=agent.id,
        project_id=agent.project_id,
        number=number,
        agent_type=agent_type,
        config=agent.config,
        created_at=at,
        created_by=by,
    )
