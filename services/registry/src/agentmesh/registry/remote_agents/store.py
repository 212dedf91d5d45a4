"""Storing remote A2A agents: the transaction methods (`RemoteAgentTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. A remote agent is unique by (`project_id`, `name`)."""

from __future__ import annotations

import abc

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.errors import RemoteAgentNameTaken
from agentmesh.registry.in_memory_state import State
from agentmesh.registry.models import PageRequest, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.remote_agents.models import RemoteAgent
from agentmesh.registry.tables import RemoteAgentRow


class RemoteAgentTransaction(abc.ABC):
    """The remote agent operations of one transaction. Reads return None for what does not
    exist; a taken name raises RemoteAgentNameTaken."""

    @abc.abstractmethod
    async def insert_remote_agent(self, remote: RemoteAgent) -> RemoteAgent: ...

    @abc.abstractmethod
    async def get_remote_agent(
        self, project_id: str, *, remote_id: str | None = None, name: str | None = None
    ) -> RemoteAgent | None: ...

    @abc.abstractmethod
    async def list_remote_agents(self, project_id: str, page: PageRequest) -> Slice[RemoteAgent]:
        """One page of the project's remote agents in (`created_at`, `id`) order."""

    @abc.abstractmethod
    async def remote_agent_names(self, project_id: str) -> list[str]:
        """The names of all the project's remote agents (what network access may name)."""

    @abc.abstractmethod
    async def update_remote_agent(self, remote: RemoteAgent) -> RemoteAgent: ...

    @abc.abstractmethod
    async def delete_remote_agent(self, remote_id: str) -> None: ...


def name_taken(name: str) -> RemoteAgentNameTaken:
    return RemoteAgentNameTaken(f"an agent or remote agent named {name!r} exists in this project")


class SqlRemoteAgents(RemoteAgentTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers it uses."""

    _session: AsyncSession

    async def insert_remote_agent(self, remote: RemoteAgent) -> RemoteAgent:
        await self._insert(RemoteAgentRow(**remote.model_dump()), {"name": name_taken(remote.name)})  # type: ignore[attr-defined]
        return remote

    async def get_remote_agent(
        self, project_id: str, *, remote_id: str | None = None, name: str | None = None
    ) -> RemoteAgent | None:
        statement = sa.select(RemoteAgentRow).where(RemoteAgentRow.project_id == project_id)
        if remote_id is not None:
            statement = statement.where(RemoteAgentRow.id == remote_id)
        if name is not None:
            statement = statement.where(RemoteAgentRow.name == name)
        row = await self._one(statement, False)  # type: ignore[attr-defined]
        return RemoteAgent.model_validate(row, from_attributes=True) if row else None

    async def list_remote_agents(self, project_id: str, page: PageRequest) -> Slice[RemoteAgent]:
        conditions = [RemoteAgentRow.project_id == project_id]
        return await self._slice(RemoteAgentRow, conditions, page, RemoteAgent)  # type: ignore[attr-defined,no-any-return]

    async def remote_agent_names(self, project_id: str) -> list[str]:
        result = await self._session.execute(
            sa.select(RemoteAgentRow.name).where(RemoteAgentRow.project_id == project_id)
        )
        return list(result.scalars())

    async def update_remote_agent(self, remote: RemoteAgent) -> RemoteAgent:
        await self._update(RemoteAgentRow, remote.id, remote.model_dump(), {"name": name_taken(remote.name)})  # type: ignore[attr-defined]
        return remote

    async def delete_remote_agent(self, remote_id: str) -> None:
        await self._session.execute(sa.delete(RemoteAgentRow).where(RemoteAgentRow.id == remote_id))

    async def delete_project_remote_agents(self, project_id: str) -> None:
        """With its project: a project's remote agents go."""
        await self._session.execute(sa.delete(RemoteAgentRow).where(RemoteAgentRow.project_id == project_id))


class InMemoryRemoteAgents(RemoteAgentTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's
    `remote_agents` (id → remote agent)."""

    _state: State

    @property
    def _remotes(self) -> dict[str, RemoteAgent]:
        return self._state.remote_agents

    async def insert_remote_agent(self, remote: RemoteAgent) -> RemoteAgent:
        if any((r.project_id, r.name) == (remote.project_id, remote.name) for r in self._remotes.values()):
            raise name_taken(remote.name)
        self._remotes[remote.id] = remote
        return remote

    async def get_remote_agent(
        self, project_id: str, *, remote_id: str | None = None, name: str | None = None
    ) -> RemoteAgent | None:
        for remote in self._remotes.values():
            if (
                remote.project_id == project_id
                and (remote_id is None or remote.id == remote_id)
                and (name is None or remote.name == name)
            ):
                return remote
        return None

    async def list_remote_agents(self, project_id: str, page: PageRequest) -> Slice[RemoteAgent]:
        return keyset_slice([r for r in self._remotes.values() if r.project_id == project_id], page)

    async def remote_agent_names(self, project_id: str) -> list[str]:
        return [r.name for r in self._remotes.values() if r.project_id == project_id]

    async def update_remote_agent(self, remote: RemoteAgent) -> RemoteAgent:
        if any(
            (r.project_id, r.name) == (remote.project_id, remote.name) and r.id != remote.id
            for r in self._remotes.values()
        ):
            raise name_taken(remote.name)
        self._remotes[remote.id] = remote
        return remote

    async def delete_remote_agent(self, remote_id: str) -> None:
        self._remotes.pop(remote_id, None)

    async def delete_project_remote_agents(self, project_id: str) -> None:
        for remote_id in [r.id for r in self._remotes.values() if r.project_id == project_id]:
            del self._remotes[remote_id]
