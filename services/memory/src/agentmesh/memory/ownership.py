"""Ownership checked where the data is: memory refuses a user a project that is not theirs.

Memory's port answers the mesh's services only (service identity), but a service acts for a user
— it forwards that user's token — and a service that names the wrong user (a confused deputy, a
bug) must not read or write another tenant's sessions. So every MemoryService call made with a
user's token is checked here against the project's owner, whatever the service in between
decided. Superusers and the system principal (the services' own bookkeeping) pass.

The registry knows owners; memory keeps its own record of them (`memory_project_owners`),
learned from the registry (`owner_of`: `agentmesh.common.v1.ProjectOwnerService`, asked once per
project) the first time a user's call names a project without one — never from the caller, so a
service acting wrongly for another user before the owner's first call gets nothing. A project the
registry does not know is refused. Without a registry to ask (a memory service given no registry
address), the first call a user makes in a project records that user, trusting the service in
between (in the mesh the gateway or an executor, which checked with the registry). Projects never
change owners (the registry's UpdateProject sets name, slug and description only), so a record
never goes stale, and is remembered in process once read. A refused caller gets NOT_FOUND,
exactly as for data that does not exist.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.memory.errors import ProjectNotFound, SessionNotFound
from agentmesh.memory.tables import project_owner_table
from agentmesh.memory.validation import MAX_ID_CHARS
from agentmesh.runtime.identity import Principal

# Owners remembered in process; a project's owner never changes, so they never go stale.
REMEMBERED_OWNERS = 10_000
# Asks the registry who owns a project ("" for a project it does not know).
OwnerSource = Callable[[str], Awaitable[str]]


def _names_a_project(project_id: str) -> bool:
    return bool(project_id) and len(project_id) <= MAX_ID_CHARS and project_id.isprintable()


class ProjectOwners:
    """Records and checks who owns each project, in memory's database."""

    def __init__(self, engine: AsyncEngine, *, owner_of: OwnerSource | None = None) -> None:
        self._engine = engine
        self._owner_of = owner_of
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        self._owners: OrderedDict[str, str] = OrderedDict()

    async def check_project(self, principal: Principal | None, project_id: str) -> None:
        """Raises NOT_FOUND (the project's) unless the principal may act in the project."""
        if not await self._admits(principal, project_id):
            raise ProjectNotFound(project_id)

    async def check_session(self, principal: Principal | None, session_id: str, project_id: str) -> None:
        """Raises NOT_FOUND (the session's, as for one that does not exist) unless the principal
        may act in the session's project."""
        if not await self._admits(principal, project_id):
            raise SessionNotFound(session_id)

    async def _admits(self, principal: Principal | None, project_id: str) -> bool:
        if principal is None or principal.is_superuser:
            # None only for a method its policy table makes public (memory has none).
            return principal is not None
        if not _names_a_project(project_id):
            return True  # the call refuses it (a missing or malformed id), naming the field
        owner = await self._owner(project_id)
        if owner is None:
            told = await self._owner_of(project_id) if self._owner_of is not None else principal.user_id
            if not told:
                return False  # a project the registry does not know
            owner = await self._record(project_id, told)
        return owner == principal.user_id

    async def _owner(self, project_id: str) -> str | None:
        owner = self._owners.get(project_id)
        if owner is None:
            statement = sa.select(project_owner_table.c.owner_id).where(
                project_owner_table.c.project_id == project_id
            )
            async with self._engine.connect() as connection:
                owner = (await connection.execute(statement)).scalar_one_or_none()
            if owner is not None:
                self._remember(project_id, owner)
        return owner

    async def _record(self, project_id: str, user_id: str) -> str | None:
        """Records the user as the project's owner unless one is recorded (by a racing call
        too): the owner recorded either way."""
        insert = (
            self._insert(project_owner_table)
            .values(project_id=project_id, owner_id=user_id, recorded_at=datetime.now(UTC))
            .on_conflict_do_nothing(index_elements=[project_owner_table.c.project_id])
        )
        async with self._engine.begin() as connection:
            await connection.execute(insert)
        return await self._owner(project_id)

    def _remember(self, project_id: str, owner: str) -> None:
        self._owners[project_id] = owner
        self._owners.move_to_end(project_id)
        while len(self._owners) > REMEMBERED_OWNERS:
            self._owners.popitem(last=False)
