"""The store's part of project limits, on every implementation (in memory, SQLite, PostgreSQL):
limits stored as set, a project's load as admission weighs it, and its tokens of the day."""

from __future__ import annotations

from agentmesh.registry.models import ProjectLimits
from agentmesh.registry.store import RegistryStore, Visibility
from tests.integration.registry.test_store_contract import T0, _world

DAY = T0.date().isoformat()


async def test_limits_are_stored_as_set(registry_store: RegistryStore) -> None:
    _, _, project, _ = await _world(registry_store)
    limited = project.model_copy(update={"limits": ProjectLimits(concurrent_runs=3, tokens_per_day=0)})
    async with registry_store.write() as tx:
        await tx.update_project(limited)
    async with registry_store.read() as tx:
        stored = await tx.get_project(project_id=project.id)
    assert stored is not None and stored.limits == ProjectLimits(concurrent_runs=3, tokens_per_day=0)
    assert stored.limits.set() == {"concurrent_runs": 3, "tokens_per_day": 0}


async def test_a_projects_load_counts_its_runs_in_flight_and_its_tokens_of_the_day(
    registry_store: RegistryStore,
) -> None:
    owner, _, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)

    async def load(run_id: str, owner_id: str | None = owner, day: str = DAY):  # type: ignore[no-untyped-def]
        async with registry_store.read() as tx:
            return await tx.project_run_load(agent.id, run_id, owner_id=owner_id, day=day)

    empty = await load("run-1")
    assert empty is not None
    assert (empty.project_id, empty.runs_in_flight, empty.started, empty.tokens_today) == (
        project.id,
        0,
        False,
        0,
    )
    await registry_store.start_run(visible, agent.id, "run-1", T0)
    await registry_store.start_run(visible, agent.id, "run-2", T0)
    busy = await load("run-1")
    assert busy is not None and (busy.runs_in_flight, busy.started) == (2, True)
    assert (await load("run-3")).started is False  # type: ignore[union-attr]
    assert await load("run-1", owner_id="someone-else") is None
    assert await load("run-1", owner_id=None) is not None

    async with registry_store.write() as tx:
        await tx.add_project_tokens({project.id: 40}, DAY)
    async with registry_store.write() as tx:
        await tx.add_project_tokens({project.id: 2}, DAY)
        await tx.add_project_tokens({project.id: 500}, "2000-01-01")
    assert (await load("run-3")).tokens_today == 42  # type: ignore[union-attr]
    assert (await load("run-3", day="2000-01-01")).tokens_today == 500  # type: ignore[union-attr]

    await registry_store.finish_run(visible, agent.id, "run-1", T0, completed=True, tokens_used=1, cost=0.0)
    assert (await load("run-3")).runs_in_flight == 1  # type: ignore[union-attr]
