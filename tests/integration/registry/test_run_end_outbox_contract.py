"""What a run's cancelled end and a question asked below enqueue, over every RegistryStore
implementation (in memory, SQLite, PostgreSQL): closing a cancelled waiting run enqueues its end
(`run.failed`, outcome `cancelled`) for the project's webhooks and its task's push configs; a run
parked on a question below enqueues `run.input_requested` for its task's push configs alone, once,
keyed by the request below."""

from __future__ import annotations

import json

from agentmesh.registry.models import PageRequest
from agentmesh.registry.runs.input_models import Cancellation
from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from agentmesh.registry.webhooks.models import SUBSCRIBABLE
from tests.integration.registry.test_input_request_store_contract import LEASE, _raised
from tests.integration.registry.test_store_contract import T0, _world
from tests.integration.registry.test_webhook_store_contract import _webhook


async def _enqueued(store: RegistryStore, hook_id: str) -> list[tuple[str, str, str, str]]:
    """The hook's deliveries: (event, run, outcome or request below, id)."""
    async with store.read() as tx:
        page = await tx.list_webhook_deliveries(hook_id, PageRequest(size=100))
    told = []
    for delivery in page.items:
        data = json.loads(delivery.data) if delivery.data else {}
        more = data.get("outcome") or data.get("input_request_id", "")
        told.append((delivery.event.value, delivery.run_id, more, delivery.id))
    return sorted(told)


async def test_a_cancelled_tree_enqueues_its_ends_and_the_top_task_its_wait_once(
    registry_store: RegistryStore,
) -> None:
    owner, _, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    async with registry_store.write() as tx:
        await tx.insert_webhook(_webhook(project.id, "project-hook", *SUBSCRIBABLE))
        task_push = _webhook(project.id, "top-task", *SUBSCRIBABLE).model_copy(update={"run_id": "top"})
        await tx.insert_webhook(task_push)
    for run_id in ("top", "run-1"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("s-1", "exec-x", T0 + LEASE)
        )
    inputs, leases = registry_store.input_requests, registry_store.leases
    await inputs.suspend("exec-x", (agent.id, "run-1"), [_raised("a", agent.id)], T0)
    await inputs.suspend("exec-x", (agent.id, "top"), [], T0, waits_on=["run-1"])
    await inputs.suspend("exec-x", (agent.id, "top"), [], T0, waits_on=["run-1"])  # a retry
    asked = ("run.input_requested", "top", "a", "top-task:run.input_requested:a")
    assert await _enqueued(registry_store, "top-task") == [
        asked,
        ("run.started", "top", "", "top-task:run.started:top"),
    ]

    await inputs.cancel_run(project.id, "a", Cancellation(by="ada@example.com"), T0)
    for _ in range(2):  # bottom up: the worker, then the top
        (orphan,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
        await leases.close("exec-y", [(agent.id, orphan.run_id)], T0)
    ends = [told[:3] for told in await _enqueued(registry_store, "project-hook") if told[0] == "run.failed"]
    assert ends == [("run.failed", "run-1", "cancelled"), ("run.failed", "top", "cancelled")]
    # The project's webhooks had the question once, from the run that asked it.
    questions = [told[:3] for told in await _enqueued(registry_store, "project-hook") if told[0] == asked[0]]
    assert questions == [("run.input_requested", "run-1", "a")]
    assert [told[:3] for told in await _enqueued(registry_store, "top-task")] == [
        ("run.failed", "top", "cancelled"),
        asked[:3],
        ("run.started", "top", ""),
    ]
