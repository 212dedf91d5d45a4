"""The cost ledger's summaries of a project's spending, for whoever may see the project
(`UsageLedger`); what a finished run adds to the ledger is `entries.py`'s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from agentmesh.registry.errors import ProjectNotFound
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.usage.models import UsageDimension, UsageSummary
from agentmesh.registry.validation import raise_if
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

# Groups a summary returns at most (the total still counts every entry).
MAX_GROUPS = 1000
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class UsageLedger:
    """Summaries of a project's cost ledger, for its owner, superusers and keys scoped to it."""

    def __init__(self, store: RegistryStore) -> None:
        self._store = store

    async def summarize(
        self,
        principal: Principal,
        project_id: str,
        group_by: Sequence[UsageDimension],
        *,
        start_day: str = "",
        end_day: str = "",
    ) -> UsageSummary:
        """The project's spending from `start_day` to `end_day` (UTC, inclusive), grouped.
        INVALID_ARGUMENT for a malformed day or a range ending before it starts; NOT_FOUND for a
        project the principal may not see."""
        violations = [
            FieldViolation(name, "must be a day as YYYY-MM-DD")
            for name, day in (("start_day", start_day), ("end_day", end_day))
            if day and not _is_day(day)
        ]
        if not violations and start_day and end_day and end_day < start_day:
            violations.append(FieldViolation("end_day", "must not be before start_day"))
        if len(set(group_by)) != len(group_by):
            violations.append(FieldViolation("group_by", "must not name a dimension twice"))
        raise_if(violations)
        if principal.project_scope and principal.project_scope != project_id:
            raise ProjectNotFound("project not found")  # a key scoped to another project
        async with self._store.read() as tx:
            await visible_project(tx, principal, project_id)
        return await self._store.usage.summarize(
            project_id, group_by, start_day=start_day, end_day=end_day, limit=MAX_GROUPS
        )


def _is_day(text: str) -> bool:
    if not _DAY.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True
