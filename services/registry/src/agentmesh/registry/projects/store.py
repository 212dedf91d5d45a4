"""Storing projects: the transaction methods (`ProjectTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. A project's slug is unique; a create's request id is unique per owner.
Deleting a project deletes everything in it, through each resource's store part."""

from __future__ import annotations

import abc
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from agentmesh.registry.errors import DuplicateRequest, SlugTaken
from agentmesh.registry.in_memory_state import State, Stored, first
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import PROJECT_FIELDS, PageRequest, Project, ProjectLimits, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.tables import AgentRow, AgentRunRow, ProjectRow, ProjectTokenDayRow

# What a project's update may change; the rest is fixed at its create.
_UPDATABLE = {*PROJECT_FIELDS, "updated_at"}


class ProjectTransaction(abc.ABC):
    """The project operations of one transaction. Reads return None for what does not exist; a
    taken slug raises SlugTaken, a used request id DuplicateRequest."""

    @abc.abstractmethod
    async def insert_project(self, project: Project, *, request_id: str | None) -> Project: ...

    @abc.abstractmethod
    async def get_project(
        self,
        *,
        project_id: str | None = None,
        slug: str | None = None,
        owner_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Project | None:
        """By id, by slug, or by (owner id, create request id)."""

    @abc.abstractmethod
    async def list_projects(self, owner_id: str | None, page: PageRequest) -> Slice[Project]:
        """All projects (None), or one owner's, in (`created_at`, `id`) order."""

    @abc.abstractmethod
    async def update_project(self, project: Project) -> Project: ...

    @abc.abstractmethod
    async def delete_project(self, project_id: str) -> None:
        """The project and everything in it: agents (and their runs), MCP servers, remote agents
        and the API keys scoped to it."""

    @abc.abstractmethod
    async def project_run_load(
        self, agent_id: str, run_id: str, *, owner_id: str | None, day: str
    ) -> ProjectRunLoad | None:
        """The load of the agent's project as a start of that run weighs it (None: no such agent,
        or not in a project of `owner_id` when given): the runs in flight are the sum of its
        agents' (what run bookkeeping counts), the tokens today those its finished runs used on
        `day` (YYYY-MM-DD)."""

    @abc.abstractmethod
    async def add_project_tokens(self, tokens: dict[str, int], day: str) -> None:
        """Adds each project's tokens (by project id) to what its finished runs used on `day`."""


@dataclass(frozen=True)
class ProjectRunLoad:
    """What admitting a run of an agent weighs: the agent's project, the limits it sets, its runs
    in flight now, whether this run is one of them already (a retried start), and the tokens its
    finished runs used today (UTC)."""

    project_id: str
    limits: ProjectLimits
    runs_in_flight: int
    started: bool
    tokens_today: int = 0


def _slug_taken(project: Project) -> SlugTaken:
    return SlugTaken(f"project slug {project.slug!r} is taken")


class SqlProjects(ProjectTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session, helpers (`_insert`,
    `_update`, `_one`, `_slice`) and other resources' parts (to delete a project's contents) it
    uses."""

    _session: AsyncSession

    async def insert_project(self, project: Project, *, request_id: str | None) -> Project:
        row = ProjectRow(**project.model_dump(), request_id=request_id)
        await self._insert(row, {"slug": _slug_taken(project), "request_id": DuplicateRequest()})  # type: ignore[attr-defined]
        return from_row(Project, row)

    async def get_project(
        self,
        *,
        project_id: str | None = None,
        slug: str | None = None,
        owner_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Project | None:
        statement = sa.select(ProjectRow)
        if project_id is not None:
            statement = statement.where(ProjectRow.id == project_id)
        if slug is not None:
            statement = statement.where(ProjectRow.slug == slug)
        if owner_request is not None:
            statement = statement.where(
                ProjectRow.owner_id == owner_request[0], ProjectRow.request_id == owner_request[1]
            )
        row = await self._one(statement, for_update)  # type: ignore[attr-defined]
        return from_row(Project, row) if row else None

    async def list_projects(self, owner_id: str | None, page: PageRequest) -> Slice[Project]:
        conditions = [] if owner_id is None else [ProjectRow.owner_id == owner_id]
        return await self._slice(ProjectRow, conditions, page, Project)  # type: ignore[attr-defined,no-any-return]

    async def update_project(self, project: Project) -> Project:
        values = project.model_dump(include=_UPDATABLE)
        await self._update(ProjectRow, project.id, values, {"slug": _slug_taken(project)})  # type: ignore[attr-defined]
        return project

    async def delete_project(self, project_id: str) -> None:
        # Explicit children first: no reliance on ON DELETE CASCADE being enabled (API keys go by
        # their foreign key).
        await self.delete_project_agents(project_id)  # type: ignore[attr-defined]
        await self.delete_project_mcp_servers(project_id)  # type: ignore[attr-defined]
        await self.delete_project_remote_agents(project_id)  # type: ignore[attr-defined]
        await self.delete_project_webhooks(project_id)  # type: ignore[attr-defined]
        await self.delete_project_schedules(project_id)  # type: ignore[attr-defined]
        await self._session.execute(
            sa.delete(ProjectTokenDayRow).where(ProjectTokenDayRow.project_id == project_id)
        )
        await self._session.execute(sa.delete(ProjectRow).where(ProjectRow.id == project_id))

    async def project_run_load(
        self, agent_id: str, run_id: str, *, owner_id: str | None, day: str
    ) -> ProjectRunLoad | None:
        agents = aliased(AgentRow)
        in_flight = (
            sa.select(sa.func.coalesce(sa.func.sum(agents.runs_in_flight), 0))
            .where(agents.project_id == ProjectRow.id)
            .scalar_subquery()
        )
        started = sa.exists().where(AgentRunRow.agent_id == agent_id, AgentRunRow.run_id == run_id)
        tokens = (
            sa.select(ProjectTokenDayRow.tokens)
            .where(ProjectTokenDayRow.project_id == ProjectRow.id, ProjectTokenDayRow.day == day)
            .scalar_subquery()
        )
        statement = (
            sa.select(ProjectRow.id, ProjectRow.limits, in_flight, started, tokens)
            .join(AgentRow, AgentRow.project_id == ProjectRow.id)
            .where(AgentRow.id == agent_id)
        )
        if owner_id is not None:
            statement = statement.where(ProjectRow.owner_id == owner_id)
        row = (await self._session.execute(statement)).first()
        if row is None:
            return None
        return ProjectRunLoad(
            project_id=row[0],
            limits=ProjectLimits.model_validate(row[1] or {}),
            runs_in_flight=row[2],
            started=row[3],
            tokens_today=row[4] or 0,
        )

    async def add_project_tokens(self, tokens: dict[str, int], day: str) -> None:
        dialect = postgresql if self._session.bind.dialect.name == "postgresql" else sqlite
        for project_id, used in sorted(tokens.items()):  # one order: concurrent batches do not deadlock
            insert = dialect.insert(ProjectTokenDayRow).values(project_id=project_id, day=day, tokens=used)
            await self._session.execute(
                insert.on_conflict_do_update(
                    index_elements=[ProjectTokenDayRow.project_id, ProjectTokenDayRow.day],
                    set_={"tokens": ProjectTokenDayRow.tokens + insert.excluded.tokens},
                )
            )


class InMemoryProjects(ProjectTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `projects`,
    and on the other resources' parts to delete a project's contents."""

    _state: State

    async def insert_project(self, project: Project, *, request_id: str | None) -> Project:
        projects = self._state.projects
        if request_id is not None and any(
            s.request_id == request_id and s.value.owner_id == project.owner_id for s in projects.values()
        ):
            raise DuplicateRequest()
        self._check_slug(project)
        projects[project.id] = Stored(project, request_id)
        return project

    async def get_project(
        self,
        *,
        project_id: str | None = None,
        slug: str | None = None,
        owner_request: tuple[str, str] | None = None,
        for_update: bool = False,
    ) -> Project | None:
        return first(
            self._state.projects.values(),
            lambda s: (
                (project_id is None or s.value.id == project_id)
                and (slug is None or s.value.slug == slug)
                and (owner_request is None or (s.value.owner_id, s.request_id) == owner_request)
            ),
        )

    async def list_projects(self, owner_id: str | None, page: PageRequest) -> Slice[Project]:
        projects = [s.value for s in self._state.projects.values()]
        return keyset_slice([p for p in projects if owner_id is None or p.owner_id == owner_id], page)

    async def update_project(self, project: Project) -> Project:
        stored = self._state.projects.get(project.id)
        if stored is not None:
            self._check_slug(project)
            current = stored.value
            changes = {name: getattr(project, name) for name in _UPDATABLE}  # as models, not dumped
            self._state.projects[project.id] = Stored(current.model_copy(update=changes), stored.request_id)
        return project

    def _check_slug(self, project: Project) -> None:
        projects = self._state.projects.values()
        if any(s.value.slug == project.slug and s.value.id != project.id for s in projects):
            raise _slug_taken(project)

    async def delete_project(self, project_id: str) -> None:
        await self.delete_project_agents(project_id)  # type: ignore[attr-defined]
        await self.delete_project_mcp_servers(project_id)  # type: ignore[attr-defined]
        await self.delete_project_api_keys(project_id)  # type: ignore[attr-defined]
        await self.delete_project_remote_agents(project_id)  # type: ignore[attr-defined]
        await self.delete_project_webhooks(project_id)  # type: ignore[attr-defined]
        await self.delete_project_schedules(project_id)  # type: ignore[attr-defined]
        self._state.projects.pop(project_id, None)
        for key in [key for key in self._state.project_tokens if key[0] == project_id]:
            del self._state.project_tokens[key]

    async def project_run_load(
        self, agent_id: str, run_id: str, *, owner_id: str | None, day: str
    ) -> ProjectRunLoad | None:
        stored = self._state.agents.get(agent_id)
        project = self._state.projects.get(stored.value.project_id) if stored else None
        if project is None or owner_id not in (None, project.value.owner_id):
            return None
        in_flight = sum(
            s.value.runs_in_flight
            for s in self._state.agents.values()
            if s.value.project_id == project.value.id
        )
        return ProjectRunLoad(
            project_id=project.value.id,
            limits=project.value.limits,
            runs_in_flight=in_flight,
            started=self._state.in_flight((agent_id, run_id)),
            tokens_today=self._state.project_tokens.get((project.value.id, day), 0),
        )

    async def add_project_tokens(self, tokens: dict[str, int], day: str) -> None:
        for project_id, used in tokens.items():
            if project_id in self._state.projects:
                key = (project_id, day)
                self._state.project_tokens[key] = self._state.project_tokens.get(key, 0) + used
