"""Storing agents' versions and the version each session's runs of an agent use: the transaction
methods (`AgentVersionTransaction`, part of every `StoreTransaction`) and their SQL and in-memory
implementations, mixed into each store's transaction class. A version is (agent, number), never
changed once written; a session's pin is (agent, session) → number. Both go with their agent's
project (`delete_project_agents`)."""

from __future__ import annotations

import abc
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import Agent, AgentVersion, Slice
from agentmesh.registry.tables import AgentRow, AgentVersionRow, SessionAgentVersionRow


class AgentVersionTransaction(abc.ABC):
    """The agent version operations of one transaction. Reads return None for what does not
    exist."""

    @abc.abstractmethod
    async def insert_agent_version(self, version: AgentVersion) -> AgentVersion:
        """Adds the version, or returns the one that has its number already (two first runs of
        an agent spawned before versions were kept both make its version 1)."""

    @abc.abstractmethod
    async def get_agent_version(self, agent_id: str, number: int = 0) -> AgentVersion | None:
        """The agent's version `number`; 0: its latest."""

    @abc.abstractmethod
    async def list_agent_versions(self, agent_id: str, *, below: int, size: int) -> Slice[AgentVersion]:
        """Up to `size` of the agent's versions, newest first, numbered below `below` (0: from the
        latest), with the agent's count of versions."""

    @abc.abstractmethod
    async def agents_of_type(self, type_id: str, *, for_update: bool = False) -> list[Agent]:
        """Every agent spawned from the type, in every project (locked with `for_update`, so a
        change of one of them waits for the type's versions of it)."""

    @abc.abstractmethod
    async def session_version(self, agent_id: str, session_id: str) -> int | None:
        """The version the session's runs of the agent use; None before its first run."""

    @abc.abstractmethod
    async def pin_session(
        self, project_id: str, agent_id: str, session_id: str, version: int, now: datetime, *, move: bool
    ) -> int:
        """Pins the session's runs of the agent to `version` when it is not pinned yet, or
        whatever its pin when `move`; the version pinned after."""

    @abc.abstractmethod
    async def session_versions(self, project_id: str, session_id: str) -> dict[str, int]:
        """The session's pins: agent id → version."""

    @abc.abstractmethod
    async def move_agent_sessions(self, agent_id: str, version: int, now: datetime) -> tuple[int, int]:
        """Pins every session that has run the agent to `version`: how many moved (were on
        another), and how many there are."""


class SqlAgentVersions(AgentVersionTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers it uses."""

    _session: AsyncSession

    async def insert_agent_version(self, version: AgentVersion) -> AgentVersion:
        values = version.model_dump(mode="json", exclude={"created_at"})
        values["config"] = version.config.model_dump(mode="json", exclude_none=True)
        dialect = postgresql if self._session.bind.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(AgentVersionRow).values(**values, created_at=version.created_at)
        await self._session.execute(insert.on_conflict_do_nothing(index_elements=["agent_id", "number"]))
        stored = await self.get_agent_version(version.agent_id, version.number)
        assert stored is not None
        return stored

    async def get_agent_version(self, agent_id: str, number: int = 0) -> AgentVersion | None:
        statement = sa.select(AgentVersionRow).where(AgentVersionRow.agent_id == agent_id)
        if number:
            statement = statement.where(AgentVersionRow.number == number)
        statement = statement.order_by(AgentVersionRow.number.desc()).limit(1)
        row = (await self._session.execute(statement)).scalars().first()
        return from_row(AgentVersion, row) if row else None

    async def list_agent_versions(self, agent_id: str, *, below: int, size: int) -> Slice[AgentVersion]:
        mine = AgentVersionRow.agent_id == agent_id
        total = await self._session.scalar(sa.select(sa.func.count()).where(mine))
        statement = sa.select(AgentVersionRow).where(mine)
        if below:
            statement = statement.where(AgentVersionRow.number < below)
        statement = statement.order_by(AgentVersionRow.number.desc()).limit(size + 1)
        rows = list((await self._session.execute(statement)).scalars())
        items = [from_row(AgentVersion, row) for row in rows[:size]]
        return Slice(items=items, has_more=len(rows) > size, total=total or 0)

    async def agents_of_type(self, type_id: str, *, for_update: bool = False) -> list[Agent]:
        statement = sa.select(AgentRow).where(AgentRow.agent_type_id == type_id).order_by(AgentRow.id)
        if for_update:
            statement = statement.with_for_update()
        return [from_row(Agent, row) for row in (await self._session.execute(statement)).scalars()]

    async def session_version(self, agent_id: str, session_id: str) -> int | None:
        return await self._session.scalar(  # type: ignore[no-any-return]
            sa.select(SessionAgentVersionRow.version).where(
                SessionAgentVersionRow.agent_id == agent_id,
                SessionAgentVersionRow.session_id == session_id,
            )
        )

    async def pin_session(
        self, project_id: str, agent_id: str, session_id: str, version: int, now: datetime, *, move: bool
    ) -> int:
        dialect = postgresql if self._session.bind.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(SessionAgentVersionRow).values(
            agent_id=agent_id, session_id=session_id, project_id=project_id, version=version, pinned_at=now
        )
        keys = ["agent_id", "session_id"]
        if move:
            statement = insert.on_conflict_do_update(
                index_elements=keys, set_={"version": version, "pinned_at": now}
            )
        else:  # a concurrent first run may have pinned it: its pin stands
            statement = insert.on_conflict_do_nothing(index_elements=keys)
        await self._session.execute(statement)
        pinned = await self.session_version(agent_id, session_id)
        assert pinned is not None
        return pinned

    async def session_versions(self, project_id: str, session_id: str) -> dict[str, int]:
        statement = sa.select(SessionAgentVersionRow.agent_id, SessionAgentVersionRow.version).where(
            SessionAgentVersionRow.project_id == project_id,
            SessionAgentVersionRow.session_id == session_id,
        )
        return {agent_id: version for agent_id, version in (await self._session.execute(statement)).all()}

    async def move_agent_sessions(self, agent_id: str, version: int, now: datetime) -> tuple[int, int]:
        mine = SessionAgentVersionRow.agent_id == agent_id
        total = await self._session.scalar(sa.select(sa.func.count()).where(mine))
        moved = await self._session.execute(
            sa.update(SessionAgentVersionRow)
            .where(mine, SessionAgentVersionRow.version != version)
            .values(version=version, pinned_at=now)
        )
        return moved.rowcount, total or 0  # type: ignore[attr-defined]

    async def delete_project_agent_versions(self, project_id: str) -> None:
        """With its project: its agents' versions and sessions' pins go."""
        for row in (AgentVersionRow, SessionAgentVersionRow):
            await self._session.execute(sa.delete(row).where(row.project_id == project_id))


class InMemoryAgentVersions(AgentVersionTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's
    `agent_versions` (agent id → versions in number order) and `session_versions`."""

    _state: State

    async def insert_agent_version(self, version: AgentVersion) -> AgentVersion:
        versions = self._state.agent_versions.get(version.agent_id, [])
        taken = next((v for v in versions if v.number == version.number), None)
        if taken is not None:
            return taken
        self._state.agent_versions[version.agent_id] = [*versions, version]
        return version

    async def get_agent_version(self, agent_id: str, number: int = 0) -> AgentVersion | None:
        versions = self._state.agent_versions.get(agent_id, [])
        if not number:
            return versions[-1] if versions else None
        return next((v for v in versions if v.number == number), None)

    async def list_agent_versions(self, agent_id: str, *, below: int, size: int) -> Slice[AgentVersion]:
        versions = self._state.agent_versions.get(agent_id, [])
        newest_first = [v for v in reversed(versions) if not below or v.number < below]
        return Slice(items=newest_first[:size], has_more=len(newest_first) > size, total=len(versions))

    async def agents_of_type(self, type_id: str, *, for_update: bool = False) -> list[Agent]:
        agents = [s.value for s in self._state.agents.values() if s.value.agent_type_id == type_id]
        return sorted(agents, key=lambda agent: agent.id)

    async def session_version(self, agent_id: str, session_id: str) -> int | None:
        pin = self._state.session_versions.get((agent_id, session_id))
        return None if pin is None else pin[1]

    async def pin_session(
        self, project_id: str, agent_id: str, session_id: str, version: int, now: datetime, *, move: bool
    ) -> int:
        key = (agent_id, session_id)
        if move or key not in self._state.session_versions:
            self._state.session_versions[key] = (project_id, version)
        return self._state.session_versions[key][1]

    async def session_versions(self, project_id: str, session_id: str) -> dict[str, int]:
        return {
            agent_id: version
            for (agent_id, session), (project, version) in self._state.session_versions.items()
            if session == session_id and project == project_id
        }

    async def move_agent_sessions(self, agent_id: str, version: int, now: datetime) -> tuple[int, int]:
        pins = self._state.session_versions
        mine = [key for key in pins if key[0] == agent_id]
        moved = [key for key in mine if pins[key][1] != version]
        for key in moved:
            pins[key] = (pins[key][0], version)
        return len(moved), len(mine)

    async def delete_project_agent_versions(self, project_id: str) -> None:
        """With its project: its agents' versions and sessions' pins go."""
        gone = {s.value.id for s in self._state.agents.values() if s.value.project_id == project_id}
        for agent_id in gone:
            self._state.agent_versions.pop(agent_id, None)
        self._state.session_versions = {
            key: pin for key, pin in self._state.session_versions.items() if pin[0] != project_id
        }
