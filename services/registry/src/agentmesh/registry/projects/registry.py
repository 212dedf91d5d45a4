"""The project rules: a user creates projects and owns them; a project, and everything in it, is
seen, changed and deleted by its owner and superusers only. Anyone else is told NOT_FOUND, exactly
as for a project that does not exist (`visible`, which every resource inside a project applies).

`ProjectRegistry` knows nothing of gRPC. Who may call which operation at all (signed in,
superuser, system) is decided before it, by the policy table in `policy.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from agentmesh.registry.agents.watch import AgentWatch
from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.errors import ProjectNotFound, UserInactive, UserRequired
from agentmesh.registry.models import PROJECT_FIELDS, Page, Project, ProjectFields, ProjectLimits
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.limits import LimitDefaults, ProjectQuotas, check_limits_change
from agentmesh.registry.store import DuplicateRequest, RegistryStore, StoreTransaction
from agentmesh.registry.validation import (
    check_project,
    exactly_one,
    raise_if,
    required,
    slugify,
    update_paths,
)
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal


def may_see(principal: Principal, project: Project) -> bool:
    return principal.is_superuser or project.owner_id == principal.user_id


def visible(principal: Principal, project: Project | None) -> Project:
    """The project, when it exists and the principal may see it; else ProjectNotFound."""
    if project is None or not may_see(principal, project):
        raise ProjectNotFound("project not found")
    return project


async def visible_project(
    tx: StoreTransaction, principal: Principal, project_id: str, *, for_update: bool = False
) -> Project:
    """The project of that id, read in `tx`, when the principal may see it; else ProjectNotFound."""
    project = await tx.get_project(project_id=project_id, for_update=for_update) if project_id else None
    return visible(principal, project)


class ProjectRegistry:
    """Projects: created by users, listed per owner (all of them for superusers), renamed and
    deleted with everything in them. A change resets the agent watch, since a project's slug is
    part of every spec in it."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        watch: AgentWatch,
        quotas: ProjectQuotas | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._pages = page_tokens
        self._watch = watch
        self._quotas = quotas or ProjectQuotas(LimitDefaults(ProjectLimits()))
        self._now = clock

    async def create(self, principal: Principal, fields: ProjectFields, *, request_id: str = "") -> Project:
        if principal.is_system:
            raise UserRequired("projects are owned by users")
        fields = fields.model_copy(update={"slug": fields.slug or slugify(fields.name)})
        raise_if(check_project(fields))
        await self._quotas.check_change(principal, ProjectLimits(), fields.limits)
        owner_request = (principal.user_id, request_id)
        now = self._now()
        project = Project(
            **fields.model_dump(),
            id=str(uuid.uuid4()),
            owner_id=principal.user_id,
            created_at=now,
            updated_at=now,
        )
        try:
            async with self._store.write() as tx:
                if request_id and (existing := await tx.get_project(owner_request=owner_request)):
                    return existing
                if await tx.get_user(principal.user_id) is None:
                    raise UserInactive("this account no longer exists")
                return await tx.insert_project(project, request_id=request_id or None)
        except DuplicateRequest:
            async with self._store.read() as tx:
                existing = await tx.get_project(owner_request=owner_request)
            if existing is None:
                raise ProjectNotFound("project not found") from None
            return existing

    async def get(self, principal: Principal, *, project_id: str = "", slug: str = "") -> Project:
        raise_if(exactly_one("id", project_id, "slug", slug))
        async with self._store.read() as tx:
            project = await tx.get_project(project_id=project_id or None, slug=slug or None)
        return visible(principal, project)

    async def owner_of(self, project_id: str) -> str:
        """Who owns the project ("" when there is none): what memory checks users' calls against
        (the system principal asks, for any project)."""
        raise_if([] if project_id else [FieldViolation("project_id", "is required")])
        async with self._store.read() as tx:
            project = await tx.get_project(project_id=project_id)
        return project.owner_id if project is not None else ""

    async def stored_bytes_limit(self, project_id: str) -> int:
        """The project's `stored_bytes` in force (0: unlimited, and for no such project): what
        memory holds its appends to (the system principal asks, for any project)."""
        raise_if([] if project_id else [FieldViolation("project_id", "is required")])
        async with self._store.read() as tx:
            project = await tx.get_project(project_id=project_id)
        if project is None:
            return 0
        return self._quotas.defaults.in_force(project.limits).stored_bytes or 0

    async def limits_in_force(self, project: Project) -> ProjectLimits:
        """Every limit of the project as it applies now: its own, else the operator's default."""
        return await self._quotas.in_force(project.limits)

    async def list(
        self, principal: Principal, *, page_size: int = 0, page_token: str = "", page: int = 0
    ) -> Page[Project]:
        owner_id = None if principal.is_superuser else principal.user_id
        scope = f"projects:{owner_id or '*'}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            found = await tx.list_projects(owner_id, request)
        return self._pages.page(found, scope=scope)

    async def update(
        self, principal: Principal, project_id: str, fields: ProjectFields, mask: Iterable[str]
    ) -> Project:
        raise_if(required("project.id", project_id))
        paths, violations = update_paths(mask, PROJECT_FIELDS)
        raise_if(violations)
        checked = "limits" in paths and not principal.is_superuser
        slots = await self._quotas.pool_run_slots() if checked else 0
        async with self._store.write() as tx:
            current = await visible_project(tx, principal, project_id, for_update=True)
            changes = {path: getattr(fields, path) for path in paths}
            updated = current.model_copy(update={**changes, "updated_at": self._now()})
            raise_if(check_project(updated))
            if checked:
                limits = self._quotas.defaults
                check_limits_change(principal, current.limits, updated.limits, limits, pool_run_slots=slots)
            updated = await tx.update_project(updated)
        self._watch.reset()
        return updated

    async def delete(self, principal: Principal, project_id: str) -> None:
        raise_if(required("id", project_id))
        async with self._store.write() as tx:
            await visible_project(tx, principal, project_id, for_update=True)
            await tx.delete_project(project_id)
        self._watch.reset()
