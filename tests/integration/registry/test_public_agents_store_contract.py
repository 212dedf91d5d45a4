"""The store's list of published agents (both stores, as `test_store_contract.py`): across
projects, in creation order by keyset, without private or terminated agents."""

from __future__ import annotations

from datetime import timedelta

from agentmesh.registry.models import AgentStatus, PageRequest
from agentmesh.registry.store import RegistryStore
from tests.integration.registry.test_store_contract import T0, _agent, _project, _user, _world


async def test_public_agents_are_listed_across_projects_without_the_private_or_terminated(
    registry_store: RegistryStore,
) -> None:
    _, agent_type, books, private = await _world(registry_store)
    other = await _user(registry_store, "bo@example.com")
    films = _project(other, "films", at=T0 + timedelta(seconds=1))
    published = [
        _agent(books, agent_type, "teller", at=T0 + timedelta(seconds=2)).model_copy(update={"public": True}),
        _agent(films, agent_type, "critic", at=T0 + timedelta(seconds=3)).model_copy(update={"public": True}),
    ]
    gone = _agent(films, agent_type, "retired", at=T0 + timedelta(seconds=4)).model_copy(
        update={"public": True, "status": AgentStatus.TERMINATED}
    )
    async with registry_store.write() as tx:
        await tx.insert_project(films, request_id=None)
        for agent in [*published, gone]:
            await tx.insert_agent(agent, request_id=None)
    async with registry_store.read() as tx:
        first = await tx.list_public_agents(PageRequest(size=1))
        last = first.items[-1]
        rest = await tx.list_public_agents(PageRequest(size=1, after=(last.created_at, last.id)))
        assert await tx.get_agent(agent_id=published[0].id) == published[0]  # `public` stored
    assert [agent.id for agent in [*first.items, *rest.items]] == [agent.id for agent in published]
    assert first.total == 2 and first.has_more and not rest.has_more
    assert not private.public
