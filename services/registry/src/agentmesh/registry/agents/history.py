"""The agent version operations of `AgentRegistry` (mixed into it): an agent's versions listed,
read and compared, an agent rolled back to one, and a session moved to one. How versions are made
and sessions pinned is `versions.py`; the registry's rules of access apply as to any agent read
(`_agent`: the project's owner, superusers, scoped API keys; anyone else is told NOT_FOUND)."""

from __future__ import annotations

from agentmesh.registry.agents.versions import FieldChange, current_version, differences
from agentmesh.registry.clock import Clock
from agentmesh.registry.errors import AgentVersionNotFound, SessionAgentAmbiguous
from agentmesh.registry.models import Agent, AgentConfig, AgentVersion, Model, Page
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.validation import raise_if, required
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal


class MovedSessions(Model):
    """Every session of an agent moved to one of its versions: how many moved (were on another)
    of how many have run it."""

    agent_id: str
    version: int
    moved: int
    sessions: int


class AgentVersionRules:
    """Versions of the registry's agents; mixed into `AgentRegistry`, whose store, page tokens,
    clock, agent lookup and update it uses."""

    _store: RegistryStore
    _pages: PageTokens
    _now: Clock

    async def _agent(
        self,
        tx: StoreTransaction,
        principal: Principal,
        project_id: str,
        agent_id: str,
        *,
        for_update: bool = False,
    ) -> Agent:
        raise NotImplementedError

    async def update_agent(
        self, principal: Principal, project_id: str, agent_id: str, config: AgentConfig, mask: list[str]
    ) -> Agent:
        raise NotImplementedError

    async def list_agent_versions(
        self,
        principal: Principal,
        project_id: str,
        agent_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[AgentVersion]:
        """The agent's versions, newest first. Versions are numbered 1, 2, ... without gaps, so
        page N starts at a number worked out from the latest (no walking the pages before it)."""
        async with self._store.read() as tx:
            agent = await self._agent(tx, principal, project_id, agent_id)
            scope = f"agent_versions:{agent.id}"
            request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
            below = int(request.after[1]) if request.after else 0
            if request.skip:
                latest = await tx.get_agent_version(agent.id)
                below = max((latest.number if latest else 0) + 1 - request.skip, 1)
            found = await tx.list_agent_versions(agent.id, below=below, size=request.size)
        last = found.items[-1] if found.has_more and found.items else None
        token = self._pages.token((last.created_at, str(last.number)), scope=scope) if last else ""
        return Page(items=found.items, next_page_token=token, total_size=found.total)

    async def get_agent_version(
        self, principal: Principal, project_id: str, agent_id: str, number: int
    ) -> AgentVersion:
        async with self._store.read() as tx:
            agent = await self._agent(tx, principal, project_id, agent_id)
            version = await tx.get_agent_version(agent.id, number) if number > 0 else None
        if version is None:
            raise AgentVersionNotFound(f"agent {agent.name!r} has no version {number}")
        return version

    async def move_session(
        self,
        principal: Principal,
        project_id: str,
        session_id: str,
        *,
        agent_ref: str = "",
        version: int = 0,
        latest: bool = False,
    ) -> dict[str, int]:
        """Moves the session's runs of an agent to its version `version`, or to its latest; with
        no agent named, the one agent the session has run (or with `latest`, each): the versions
        the session's runs use after, by agent id. Its next run uses them."""
        raise_if(
            required("project_id", project_id)
            + required("session_id", session_id)
            + _move_violations(version, latest)
        )
        now = self._now()
        async with self._store.write() as tx:
            await visible_project(tx, principal, project_id)
            if agent_ref:
                agents = [await self._agent(tx, principal, project_id, agent_ref, for_update=True)]
            else:
                pins = await tx.session_versions(project_id, session_id)
                found = [await tx.get_agent(agent_id=agent_id, for_update=True) for agent_id in sorted(pins)]
                agents = [agent for agent in found if agent is not None]
                if not agents or (len(agents) > 1 and not latest):
                    raise SessionAgentAmbiguous(
                        f"session {session_id!r} has run {len(agents)} agents: name the agent to move"
                    )
            for agent in agents:
                target = await _target(tx, agent, version, latest)
                await tx.pin_session(project_id, agent.id, session_id, target.number, now, move=True)
            return await tx.session_versions(project_id, session_id)

    async def move_agent_sessions(
        self, principal: Principal, project_id: str, agent_ref: str, *, version: int = 0, latest: bool = False
    ) -> MovedSessions:
        """Moves every session that has run the agent to its version `version`, or to its latest:
        their next runs use it (a run in flight finishes on its own)."""
        raise_if(
            required("project_id", project_id)
            + required("agent_id", agent_ref)
            + _move_violations(version, latest)
        )
        now = self._now()
        async with self._store.write() as tx:
            agent = await self._agent(tx, principal, project_id, agent_ref, for_update=True)
            target = await _target(tx, agent, version, latest)
            moved, total = await tx.move_agent_sessions(agent.id, target.number, now)
        return MovedSessions(agent_id=agent.id, version=target.number, moved=moved, sessions=total)

    async def diff_agent_versions(
        self, principal: Principal, project_id: str, agent_id: str, number: int, against: int
    ) -> list[FieldChange]:
        """What differs from version `against` to version `number` (by default the one before)."""
        async with self._store.read() as tx:
            agent = await self._agent(tx, principal, project_id, agent_id)
            against = against or number - 1
            found = [await tx.get_agent_version(agent.id, n) if n > 0 else None for n in (against, number)]
        for n, version in zip((against, number), found, strict=True):
            if version is None:
                raise AgentVersionNotFound(f"agent {agent.name!r} has no version {n}")
        before, after = found
        assert before is not None and after is not None
        return differences(before, after)

    async def restore_agent_version(
        self, principal: Principal, project_id: str, agent_id: str, number: int
    ) -> tuple[Agent, AgentVersion]:
        """Rolls the agent back to version `number`: its config overrides become that version's,
        which makes a new version (none when they are that already). The agent type is shared with
        other agents and stays as it is. The agent, and its latest version."""
        version = await self.get_agent_version(principal, project_id, agent_id, number)
        agent = await self.update_agent(principal, project_id, agent_id, version.config, ["config"])
        async with self._store.read() as tx:
            latest = await tx.get_agent_version(agent.id)
        assert latest is not None
        return agent, latest


async def _target(tx: StoreTransaction, agent: Agent, version: int, latest: bool) -> AgentVersion:
    """The agent's version `version`, or with `latest` its latest."""
    if latest:
        agent_type = await tx.get_agent_type(type_id=agent.agent_type_id)
        assert agent_type is not None  # a RESTRICT foreign key
        return await current_version(tx, agent, agent_type)
    target = await tx.get_agent_version(agent.id, version)
    if target is None:
        raise AgentVersionNotFound(f"agent {agent.name!r} has no version {version}")
    return target


def _move_violations(version: int, latest: bool) -> list[FieldViolation]:
    if latest and version:
        return [FieldViolation("version", "give a version or latest, not both")]
    if not latest and version <= 0:
        return [FieldViolation("version", "must be a version number (1 or more), or give latest")]
    return []
