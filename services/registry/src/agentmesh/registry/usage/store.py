"""The cost ledger's store: its interface (`UsageLedgerStore`, `RegistryStore.usage`), on the
registry's SQL engines and in memory (the plain statement of the same contract).

An entry is one run's calls of one model, keyed by (agent, run, model): an executor that reports a
run's end again (a retried call) adds nothing. Summaries group entries by any of agent, user,
model, session and day, sorted by the keys grouped by, over a range of UTC days."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.registry.tables import UsageEntryRow
from agentmesh.registry.usage.models import UsageDimension, UsageEntry, UsageGroup, UsageSummary

_LEDGER = UsageEntryRow.__table__
# The entry field (and column) each dimension groups on.
KEYS = {
    UsageDimension.AGENT: "agent_id",
    UsageDimension.USER: "user_id",
    UsageDimension.MODEL: "model",
    UsageDimension.SESSION: "session_id",
    UsageDimension.DAY: "day",
}
_COUNTS = ("calls", "input_tokens", "output_tokens", "cached_input_tokens")


class UsageLedgerStore(abc.ABC):
    """The cost ledger's entries."""

    @abc.abstractmethod
    async def record(self, entries: Sequence[UsageEntry]) -> None:
        """Adds the entries; one already recorded (same agent, run and model) stays as it was."""

    @abc.abstractmethod
    async def summarize(
        self,
        project_id: str,
        group_by: Sequence[UsageDimension],
        *,
        start_day: str = "",
        end_day: str = "",
        limit: int,
    ) -> UsageSummary:
        """The project's entries from `start_day` to `end_day` (inclusive; empty: unbounded),
        summed per group of `group_by`'s keys, sorted by them: at most `limit` groups."""


class SqlUsageLedgerStore(UsageLedgerStore):
    """UsageLedgerStore on the registry's SQL engines (`write_engine` begins write transactions)."""

    def __init__(self, engine: AsyncEngine, *, write_engine: AsyncEngine) -> None:
        self._engine = engine
        self._write_engine = write_engine
        self._insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert

    async def record(self, entries: Sequence[UsageEntry]) -> None:
        if not entries:
            return
        rows = [entry.model_dump() for entry in entries]
        statement = self._insert(_LEDGER).on_conflict_do_nothing(
            index_elements=["agent_id", "run_id", "model"]
        )
        async with self._write_engine.begin() as connection:
            await connection.execute(statement, rows)

    async def summarize(
        self,
        project_id: str,
        group_by: Sequence[UsageDimension],
        *,
        start_day: str = "",
        end_day: str = "",
        limit: int,
    ) -> UsageSummary:
        where = [_LEDGER.c.project_id == project_id]
        if start_day:
            where.append(_LEDGER.c.day >= start_day)
        if end_day:
            where.append(_LEDGER.c.day <= end_day)
        keys = [_LEDGER.c[KEYS[dimension]] for dimension in group_by]
        sums = [
            sa.func.count(sa.distinct(_LEDGER.c.run_id)).label("runs"),
            *(sa.func.coalesce(sa.func.sum(_LEDGER.c[name]), 0).label(name) for name in _COUNTS),
            sa.func.coalesce(sa.func.sum(_LEDGER.c.cost), 0.0).label("cost"),
        ]
        names = [sa.func.max(_LEDGER.c.agent).label("agent")] if UsageDimension.AGENT in group_by else []
        grouped = (
            sa.select(*keys, *names, *sums).where(*where).group_by(*keys).order_by(*keys).limit(limit + 1)
        )
        unpriced = (
            sa.select(*keys, _LEDGER.c.model.label("unpriced_model"))
            .where(*where, sa.not_(_LEDGER.c.cost_known))
            .distinct()
        )
        async with self._engine.connect() as connection:
            rows = [row._asdict() for row in await connection.execute(grouped)]
            total = (await connection.execute(sa.select(*sums).where(*where))).one()._asdict()
            unpriced_rows = [row._asdict() for row in await connection.execute(unpriced)]
        return _summary(rows, total, unpriced_rows, group_by, limit)


class InMemoryUsageLedgerStore(UsageLedgerStore):
    """UsageLedgerStore in memory. A deleted project's entries stay (nobody can see them: its id
    is never given again), where the SQL store deletes them with it."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str], UsageEntry] = {}

    async def record(self, entries: Sequence[UsageEntry]) -> None:
        for entry in entries:
            self._entries.setdefault((entry.agent_id, entry.run_id, entry.model), entry)

    async def summarize(
        self,
        project_id: str,
        group_by: Sequence[UsageDimension],
        *,
        start_day: str = "",
        end_day: str = "",
        limit: int,
    ) -> UsageSummary:
        counted = [
            entry
            for entry in self._entries.values()
            if entry.project_id == project_id
            and (not start_day or entry.day >= start_day)
            and (not end_day or entry.day <= end_day)
        ]
        fields = [KEYS[dimension] for dimension in group_by]
        groups: dict[tuple[str, ...], list[UsageEntry]] = {}
        for entry in counted:
            groups.setdefault(tuple(getattr(entry, name) for name in fields), []).append(entry)
        rows = []
        for key in sorted(groups)[: limit + 1]:
            row = {**dict(zip(fields, key, strict=True)), **_sums(groups[key])}
            if UsageDimension.AGENT in group_by:
                row["agent"] = max(entry.agent for entry in groups[key])
            rows.append(row)
        unpriced = {
            (*(getattr(entry, name) for name in fields), entry.model)
            for entry in counted
            if not entry.cost_known
        }
        unpriced_rows = [
            {**dict(zip(fields, key, strict=False)), "unpriced_model": key[-1]} for key in unpriced
        ]
        return _summary(rows, _sums(counted), unpriced_rows, group_by, limit)


def _sums(entries: Iterable[UsageEntry]) -> dict[str, Any]:
    entries = list(entries)
    sums: dict[str, Any] = {name: sum(getattr(entry, name) for entry in entries) for name in _COUNTS}
    return {**sums, "runs": len({entry.run_id for entry in entries}), "cost": sum(e.cost for e in entries)}


def _summary(
    rows: Sequence[dict[str, Any]],
    total: dict[str, Any],
    unpriced_rows: Sequence[dict[str, Any]],
    group_by: Sequence[UsageDimension],
    limit: int,
) -> UsageSummary:
    """The summary from its groups' rows (at most `limit` + 1), its total's, and the unpriced
    models per group (with no group, of the total)."""
    fields = [KEYS[dimension] for dimension in group_by]
    unpriced: dict[tuple[str, ...], set[str]] = {}
    for row in unpriced_rows:
        unpriced.setdefault(tuple(row[name] for name in fields), set()).add(row["unpriced_model"])
    every_unpriced = sorted({row["unpriced_model"] for row in unpriced_rows})

    def group(row: dict[str, Any], models: Iterable[str]) -> UsageGroup:
        known = {name: row[name] for name in UsageGroup.model_fields if name in row}
        return UsageGroup(**{**known, "cost": float(row["cost"]), "unpriced_models": tuple(sorted(models))})

    groups = [group(row, unpriced.get(tuple(row[name] for name in fields), ())) for row in rows[:limit]]
    return UsageSummary(groups=groups, total=group(total, every_unpriced), truncated=len(rows) > limit)
