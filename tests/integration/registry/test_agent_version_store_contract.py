"""The agent version store's contract, over every RegistryStore implementation (in memory,
SQLite, PostgreSQL): versions numbered per agent and listed newest first, sessions pinned once and
moved on purpose (one at a time, or every session of an agent), and both gone with their project."""

from __future__ import annotations

from datetime import timedelta

from agentmesh.registry.models import AgentConfig, AgentVersion
from agentmesh.registry.store import RegistryStore

from .test_store_contract import T0, _agent, _world


def _version(agent_id: str, project_id: str, agent_type: object, number: int, text: str) -> AgentVersion:
    return AgentVersion.model_validate(
        {
            "agent_id": agent_id,
            "project_id": project_id,
            "number": number,
            "agent_type": agent_type,
            "config": AgentConfig(instructions=text, mock_responses=[text]),
            "created_at": T0 + timedelta(seconds=number),
            "created_by": "owner",
        }
    )


async def test_versions_are_kept_whole_and_listed_newest_first(registry_store: RegistryStore) -> None:
    _, agent_type, project, agent = await _world(registry_store)
    async with registry_store.write() as tx:
        assert await tx.get_agent_version(agent.id) is None
        for number in (1, 2, 3):
            await tx.insert_agent_version(_version(agent.id, project.id, agent_type, number, f"v{number}"))
    async with registry_store.read() as tx:
        latest = await tx.get_agent_version(agent.id)
        second = await tx.get_agent_version(agent.id, 2)
        missing = await tx.get_agent_version(agent.id, 9)
        first_page = await tx.list_agent_versions(agent.id, below=0, size=2)
        last_page = await tx.list_agent_versions(agent.id, below=2, size=2)
        of_type = await tx.agents_of_type(agent_type.id)
    assert latest == _version(agent.id, project.id, agent_type, 3, "v3")
    assert second is not None and second.config.mock_responses == ["v2"] and second.agent_type == agent_type
    assert missing is None
    assert [v.number for v in first_page.items] == [3, 2] and first_page.has_more and first_page.total == 3
    assert [v.number for v in last_page.items] == [1] and not last_page.has_more
    assert [a.id for a in of_type] == [agent.id]
    async with registry_store.write() as tx:  # a number taken keeps its version
        again = await tx.insert_agent_version(_version(agent.id, project.id, agent_type, 3, "other"))
    assert again == latest


async def test_a_session_is_pinned_once_and_moved_on_purpose(registry_store: RegistryStore) -> None:
    _, agent_type, project, agent = await _world(registry_store)
    other = _agent(project, agent_type, "other")
    async with registry_store.write() as tx:
        await tx.insert_agent(other, request_id=None)
        assert await tx.session_version(agent.id, "s1") is None
        assert await tx.pin_session(project.id, agent.id, "s1", 1, T0, move=False) == 1
        assert await tx.pin_session(project.id, agent.id, "s1", 2, T0, move=False) == 1
        assert await tx.pin_session(project.id, other.id, "s1", 4, T0, move=False) == 4
    async with registry_store.write() as tx:
        assert await tx.pin_session(project.id, agent.id, "s1", 3, T0, move=True) == 3
    async with registry_store.read() as tx:
        assert await tx.session_version(agent.id, "s1") == 3
        assert await tx.session_versions(project.id, "s1") == {agent.id: 3, other.id: 4}
        assert await tx.session_versions(project.id, "s2") == {}


async def test_every_session_of_an_agent_moves_at_once(registry_store: RegistryStore) -> None:
    _, agent_type, project, agent = await _world(registry_store)
    other = _agent(project, agent_type, "other")
    async with registry_store.write() as tx:
        await tx.insert_agent(other, request_id=None)
        for session_id, version in (("s1", 1), ("s2", 2), ("s3", 1)):
            await tx.pin_session(project.id, agent.id, session_id, version, T0, move=False)
        await tx.pin_session(project.id, other.id, "s1", 1, T0, move=False)
    async with registry_store.write() as tx:
        assert await tx.move_agent_sessions(agent.id, 2, T0) == (2, 3)
    async with registry_store.write() as tx:
        assert await tx.move_agent_sessions(agent.id, 2, T0) == (0, 3)
        assert await tx.move_agent_sessions("no-such-agent", 2, T0) == (0, 0)
    async with registry_store.read() as tx:
        assert [await tx.session_version(agent.id, s) for s in ("s1", "s2", "s3")] == [2, 2, 2]
        assert await tx.session_version(other.id, "s1") == 1


async def test_versions_and_pins_go_with_their_project(registry_store: RegistryStore) -> None:
    _, agent_type, project, agent = await _world(registry_store)
    async with registry_store.write() as tx:
        await tx.insert_agent_version(_version(agent.id, project.id, agent_type, 1, "v1"))
        await tx.pin_session(project.id, agent.id, "s1", 1, T0, move=False)
    async with registry_store.write() as tx:
        await tx.delete_project(project.id)
    async with registry_store.read() as tx:
        assert await tx.get_agent_version(agent.id) is None
        assert await tx.session_versions(project.id, "s1") == {}
