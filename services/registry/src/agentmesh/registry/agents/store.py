"""Storing agent types and agents: the transaction methods (`AgentTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. A type's slug is unique; an agent's name and slug are unique in its project.
Run bookkeeping changes agents too, through the lifecycle rules (`lifecycle.py`), in the store
itself (`RegistryStore.start_run`, `finish_run`), where each run's change is atomic."""

from __future__ import annotations

import abc

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.errors import AgentNameTaken, DuplicateRequest, SlugTaken
from agentmesh.registry.in_memory_state import State, Stored, first
from agentmesh.registry.mappers import agent_type_values, agent_values, from_row
from agentmesh.registry.models import Agent, AgentStatus, AgentType, PageRequest, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.tables import AgentRow, AgentRunRow, AgentTypeRow, InputRequestRow


class AgentTransaction(abc.ABC):
    """The agent type and agent operations of one transaction. Reads return None for what does not
    exist; a taken slug raises SlugTaken, a taken agent name or slug AgentNameTaken, a used request
    id DuplicateRequest."""

    # Agent types.
    @abc.abstractmethod
    async def insert_agent_type(self, agent_type: AgentType, *, request_id: str | None) -> AgentType: ...

    @abc.abstractmethod
    async def get_agent_type(
        self,
        *,
        type_id: str | None = None,
        slug: str | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> AgentType | None: ...

    @abc.abstractmethod
    async def list_agent_types(self, page: PageRequest) -> Slice[AgentType]: ...

    @abc.abstractmethod
    async def update_agent_type(self, agent_type: AgentType) -> AgentType: ...

    @abc.abstractmethod
    async def delete_agent_type(self, type_id: str) -> None: ...

    @abc.abstractmethod
    async def agent_type_in_use(self, type_id: str) -> bool: ...

    # Agents.
    @abc.abstractmethod
    async def insert_agent(self, agent: Agent, *, request_id: str | None) -> Agent: ...

    @abc.abstractmethod
    async def get_agent(
        self,
        *,
        agent_id: str | None = None,
        project_ref: tuple[str, str] | None = None,
        project_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Agent | None:
        """By id; or `project_ref` = (project id, reference): the project's agent whose id, slug
        or exact name is the reference, in that order of precedence; or by create request id."""

    @abc.abstractmethod
    async def list_agents(self, project_id: str, page: PageRequest) -> Slice[Agent]: ...

    @abc.abstractmethod
    async def list_public_agents(self, page: PageRequest) -> Slice[Agent]:
        """The agents their owners published, across projects, terminated ones left out."""

    @abc.abstractmethod
    async def agent_slugs(self, project_id: str) -> dict[str, str]:
        """The project's agents: slug → name."""

    @abc.abstractmethod
    async def update_agent(self, agent: Agent) -> Agent: ...


def _type_slug_taken(agent_type: AgentType) -> SlugTaken:
    return SlugTaken(f"agent type slug {agent_type.slug!r} is taken")


def _agent_name_taken(agent: Agent) -> AgentNameTaken:
    return AgentNameTaken(f"an agent named {agent.name!r} exists in this project")


def _agent_slug_taken(agent: Agent) -> AgentNameTaken:
    return AgentNameTaken(f"an agent with the slug {agent.slug!r} exists in this project")


class SqlAgents(AgentTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers
    (`_insert`, `_update`, `_one`, `_slice`) it uses."""

    _session: AsyncSession

    # Agent types.

    async def insert_agent_type(self, agent_type: AgentType, *, request_id: str | None) -> AgentType:
        row = AgentTypeRow(**agent_type_values(agent_type), request_id=request_id)
        await self._insert(row, {"slug": _type_slug_taken(agent_type), "request_id": DuplicateRequest()})  # type: ignore[attr-defined]
        return from_row(AgentType, row)

    async def get_agent_type(
        self,
        *,
        type_id: str | None = None,
        slug: str | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> AgentType | None:
        statement = sa.select(AgentTypeRow)
        if type_id is not None:
            statement = statement.where(AgentTypeRow.id == type_id)
        if slug is not None:
            statement = statement.where(AgentTypeRow.slug == slug)
        if request_id is not None:
            statement = statement.where(AgentTypeRow.request_id == request_id)
        row = await self._one(statement, for_update)  # type: ignore[attr-defined]
        return from_row(AgentType, row) if row else None

    async def list_agent_types(self, page: PageRequest) -> Slice[AgentType]:
        return await self._slice(AgentTypeRow, [], page, AgentType)  # type: ignore[attr-defined,no-any-return]

    async def update_agent_type(self, agent_type: AgentType) -> AgentType:
        values = agent_type_values(agent_type)
        await self._update(AgentTypeRow, agent_type.id, values, {"slug": _type_slug_taken(agent_type)})  # type: ignore[attr-defined]
        return agent_type

    async def delete_agent_type(self, type_id: str) -> None:
        await self._session.execute(sa.delete(AgentTypeRow).where(AgentTypeRow.id == type_id))

    async def agent_type_in_use(self, type_id: str) -> bool:
        statement = sa.select(sa.literal(1)).where(AgentRow.agent_type_id == type_id).limit(1)
        return (await self._session.execute(statement)).first() is not None

    # Agents.

    async def insert_agent(self, agent: Agent, *, request_id: str | None) -> Agent:
        row = AgentRow(**agent_values(agent), request_id=request_id)
        await self._insert(  # type: ignore[attr-defined]
            row,
            {
                "name": _agent_name_taken(agent),
                "slug": _agent_slug_taken(agent),
                "request_id": DuplicateRequest(),
            },
        )
        return from_row(Agent, row)

    async def get_agent(
        self,
        *,
        agent_id: str | None = None,
        project_ref: tuple[str, str] | None = None,
        project_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Agent | None:
        statement = sa.select(AgentRow)
        if agent_id is not None:
            statement = statement.where(AgentRow.id == agent_id)
        if project_ref is not None:
            project_id, ref = project_ref
            statement = statement.where(
                AgentRow.project_id == project_id,
                sa.or_(AgentRow.id == ref, AgentRow.slug == ref, AgentRow.name == ref),
            ).order_by(sa.case((AgentRow.id == ref, 0), (AgentRow.slug == ref, 1), else_=2))
        if project_request is not None:
            statement = statement.where(
                AgentRow.project_id == project_request[0], AgentRow.request_id == project_request[1]
            )
        row = await self._one(statement, for_update)  # type: ignore[attr-defined]
        return from_row(Agent, row) if row else None

    async def list_agents(self, project_id: str, page: PageRequest) -> Slice[Agent]:
        return await self._slice(AgentRow, [AgentRow.project_id == project_id], page, Agent)  # type: ignore[attr-defined,no-any-return]

    async def list_public_agents(self, page: PageRequest) -> Slice[Agent]:
        published = [AgentRow.public.is_(True), AgentRow.status != AgentStatus.TERMINATED.value]
        return await self._slice(AgentRow, published, page, Agent)  # type: ignore[attr-defined,no-any-return]

    async def agent_slugs(self, project_id: str) -> dict[str, str]:
        result = await self._session.execute(
            sa.select(AgentRow.slug, AgentRow.name).where(AgentRow.project_id == project_id)
        )
        return {slug: name for slug, name in result.tuples()}

    async def update_agent(self, agent: Agent) -> Agent:
        await self._update(AgentRow, agent.id, agent_values(agent), {})  # type: ignore[attr-defined]
        return agent

    async def delete_project_agents(self, project_id: str) -> None:
        """With its project: its agents go, and their runs and requests for input first (no
        reliance on ON DELETE CASCADE being enabled)."""
        agents = sa.select(AgentRow.id).where(AgentRow.project_id == project_id)
        await self.delete_project_agent_versions(project_id)  # type: ignore[attr-defined]
        await self._session.execute(sa.delete(AgentRunRow).where(AgentRunRow.agent_id.in_(agents)))
        await self._session.execute(
            sa.delete(InputRequestRow).where(InputRequestRow.project_id == project_id)
        )
        await self._session.execute(sa.delete(AgentRow).where(AgentRow.project_id == project_id))


class InMemoryAgents(AgentTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's
    `agent_types`, `agents` and `runs`."""

    _state: State

    # Agent types.

    async def insert_agent_type(self, agent_type: AgentType, *, request_id: str | None) -> AgentType:
        types = self._state.agent_types
        if request_id is not None and any(s.request_id == request_id for s in types.values()):
            raise DuplicateRequest()
        self._check_type_slug(agent_type)
        types[agent_type.id] = Stored(agent_type, request_id)
        return agent_type

    async def get_agent_type(
        self,
        *,
        type_id: str | None = None,
        slug: str | None = None,
        request_id: str | None = None,
        for_update: bool = False,
    ) -> AgentType | None:
        return first(
            self._state.agent_types.values(),
            lambda s: (
                (type_id is None or s.value.id == type_id)
                and (slug is None or s.value.slug == slug)
                and (request_id is None or s.request_id == request_id)
            ),
        )

    async def list_agent_types(self, page: PageRequest) -> Slice[AgentType]:
        return keyset_slice([s.value for s in self._state.agent_types.values()], page)

    async def update_agent_type(self, agent_type: AgentType) -> AgentType:
        stored = self._state.agent_types.get(agent_type.id)
        if stored is not None:
            self._check_type_slug(agent_type)
            self._state.agent_types[agent_type.id] = Stored(agent_type, stored.request_id)
        return agent_type

    def _check_type_slug(self, agent_type: AgentType) -> None:
        types = self._state.agent_types.values()
        if any(s.value.slug == agent_type.slug and s.value.id != agent_type.id for s in types):
            raise _type_slug_taken(agent_type)

    async def delete_agent_type(self, type_id: str) -> None:
        self._state.agent_types.pop(type_id, None)

    async def agent_type_in_use(self, type_id: str) -> bool:
        return any(s.value.agent_type_id == type_id for s in self._state.agents.values())

    # Agents.

    async def insert_agent(self, agent: Agent, *, request_id: str | None) -> Agent:
        siblings = [s for s in self._state.agents.values() if s.value.project_id == agent.project_id]
        if request_id is not None and any(s.request_id == request_id for s in siblings):
            raise DuplicateRequest()
        if any(s.value.name == agent.name for s in siblings):
            raise _agent_name_taken(agent)
        if any(s.value.slug == agent.slug for s in siblings):
            raise _agent_slug_taken(agent)
        self._state.agents[agent.id] = Stored(agent, request_id)
        return agent

    async def get_agent(
        self,
        *,
        agent_id: str | None = None,
        project_ref: tuple[str, str] | None = None,
        project_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Agent | None:
        found = [
            s.value
            for s in self._state.agents.values()
            if (agent_id is None or s.value.id == agent_id)
            and (project_request is None or (s.value.project_id, s.request_id) == project_request)
        ]
        if project_ref is not None:
            project_id, ref = project_ref
            in_project = [agent for agent in found if agent.project_id == project_id]
            found = [
                agent
                for field in ("id", "slug", "name")
                for agent in in_project
                if getattr(agent, field) == ref
            ]
        return found[0] if found else None

    async def list_agents(self, project_id: str, page: PageRequest) -> Slice[Agent]:
        agents = [s.value for s in self._state.agents.values()]
        return keyset_slice([agent for agent in agents if agent.project_id == project_id], page)

    async def list_public_agents(self, page: PageRequest) -> Slice[Agent]:
        agents = [s.value for s in self._state.agents.values()]
        published = [a for a in agents if a.public and a.status is not AgentStatus.TERMINATED]
        return keyset_slice(published, page)

    async def agent_slugs(self, project_id: str) -> dict[str, str]:
        agents = [s.value for s in self._state.agents.values() if s.value.project_id == project_id]
        return {agent.slug: agent.name for agent in agents}

    async def update_agent(self, agent: Agent) -> Agent:
        stored = self._state.agents.get(agent.id)
        if stored is not None:
            self._state.agents[agent.id] = Stored(agent, stored.request_id)
        return agent

    async def delete_project_agents(self, project_id: str) -> None:
        """With its project: its agents go, and their runs and requests for input."""
        await self.delete_project_agent_versions(project_id)  # type: ignore[attr-defined]
        gone = {agent_id for agent_id, s in self._state.agents.items() if s.value.project_id == project_id}
        self._state.runs = {run for run in self._state.runs if run[0] not in gone}
        self._state.input_requests = {
            key: request
            for key, request in self._state.input_requests.items()
            if request.agent_id not in gone
        }
        for agent_id in gone:
            del self._state.agents[agent_id]
