"""The UsageLedgerStore contract over every RegistryStore implementation (in memory, SQLite,
PostgreSQL): an entry is recorded once however often it is reported, summaries group and sort by
the dimensions asked, count what a range of days holds, name the unpriced models, and stop at
their limit saying so."""

from __future__ import annotations

import pytest

from agentmesh.registry.store import RegistryStore
from agentmesh.registry.usage.models import UsageDimension, UsageEntry
from tests.integration.registry.test_store_contract import T0, _world

AGENT, USER, MODEL, SESSION, DAY = UsageDimension


def _entry(project_id: str, agent_id: str, run_id: str, model: str = "mock", **fields: object) -> UsageEntry:
    values: dict[str, object] = {
        "project_id": project_id,
        "agent_id": agent_id,
        "agent": "worker",
        "user_id": "u-1",
        "session_id": "s-1",
        "run_id": run_id,
        "model": model,
        "day": "2026-11-28",
        "calls": 2,
        "input_tokens": 100,
        "output_tokens": 10,
        "cached_input_tokens": 40,
        "cost": 0.25,
        "cost_known": True,
        "recorded_at": T0,
    }
    return UsageEntry(**{**values, **fields})  # type: ignore[arg-type]


async def test_an_entry_reported_again_is_counted_once(registry_store: RegistryStore) -> None:
    _, _, project, agent = await _world(registry_store)
    entry = _entry(project.id, agent.id, "run-1")
    await registry_store.usage.record([entry])
    await registry_store.usage.record([entry, entry.model_copy(update={"calls": 99})])

    summary = await registry_store.usage.summarize(project.id, [], limit=10)

    assert [(g.calls, g.runs) for g in summary.groups] == [(2, 1)]
    total = summary.total
    assert (total.calls, total.input_tokens, total.output_tokens, total.cached_input_tokens) == (
        2,
        100,
        10,
        40,
    )
    assert total.cost == pytest.approx(0.25) and total.unpriced_models == ()


async def test_summaries_group_sort_and_bound_by_day(registry_store: RegistryStore) -> None:
    _, _, project, agent = await _world(registry_store)
    await registry_store.usage.record(
        [
            _entry(project.id, agent.id, "run-1", "b-model"),
            _entry(project.id, agent.id, "run-1", "a-model", cost=0.0, cost_known=False),
            _entry(project.id, agent.id, "run-2", "b-model", day="2026-11-29", user_id="u-2"),
            _entry(project.id, agent.id, "run-3", "b-model", day="2026-11-30", session_id="s-2"),
        ]
    )
    usage = registry_store.usage

    by_model = await usage.summarize(project.id, [MODEL], limit=10)
    assert [(g.model, g.runs, g.calls, g.unpriced_models) for g in by_model.groups] == [
        ("a-model", 1, 2, ("a-model",)),
        ("b-model", 3, 6, ()),
    ]
    assert by_model.total.runs == 3 and by_model.total.unpriced_models == ("a-model",)

    by_day_user = await usage.summarize(project.id, [DAY, USER], limit=10)
    assert [(g.day, g.user_id, g.calls, g.model) for g in by_day_user.groups] == [
        ("2026-11-28", "u-1", 4, ""),
        ("2026-11-29", "u-2", 2, ""),
        ("2026-11-30", "u-1", 2, ""),
    ]

    by_agent = await usage.summarize(project.id, [AGENT, SESSION], limit=10)
    assert [(g.agent_id, g.agent, g.session_id, g.calls) for g in by_agent.groups] == [
        (agent.id, "worker", "s-1", 6),
        (agent.id, "worker", "s-2", 2),
    ]

    ranged = await usage.summarize(project.id, [DAY], start_day="2026-11-29", end_day="2026-11-29", limit=10)
    assert [g.day for g in ranged.groups] == ["2026-11-29"] and ranged.total.calls == 2
    assert ranged.total.unpriced_models == ()

    bounded = await usage.summarize(project.id, [DAY], limit=2)
    assert [g.day for g in bounded.groups] == ["2026-11-28", "2026-11-29"] and bounded.truncated
    assert bounded.total.calls == 8

    other = await usage.summarize("another-project", [MODEL], limit=10)
    assert other.groups == [] and other.total.calls == 0 and not other.truncated
