"""The webhooks' store contract over every RegistryStore implementation (in memory, SQLite,
PostgreSQL), on a clock of the test's own: a run's start and end enqueue their events for the
subscriptions that ask for them, once however often they are retried; a claim takes a due
delivery from every other claim until it ends; an attempt settles it delivered, due again, or
failed; deleting the subscription or the project drops its deliveries."""

from __future__ import annotations

from datetime import timedelta

from agentmesh.registry.models import PageRequest
from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from agentmesh.registry.webhooks.models import DeliveryState, Webhook, WebhookEvent
from tests.integration.registry.test_store_contract import T0, _world

SECOND = timedelta(seconds=1)
PAGE = PageRequest(size=50)


def _webhook(project_id: str, webhook_id: str, *events: WebhookEvent) -> Webhook:
    return Webhook(
        id=webhook_id,
        project_id=project_id,
        url="https://example.com/hook",
        events=events,
        secret="whsec_c2VjcmV0",
        created_at=T0,
    )


async def _deliveries(store: RegistryStore, webhook_id: str) -> list[tuple[str, str, DeliveryState, int]]:
    async with store.read() as tx:
        found = await tx.list_webhook_deliveries(webhook_id, PAGE)
    return sorted((d.event.value, d.run_id, d.state, d.attempts) for d in found.items)


async def test_run_events_are_enqueued_once_claimed_once_and_settled(registry_store: RegistryStore) -> None:
    owner, _, project, agent = await _world(registry_store)
    ends = _webhook(project.id, "hook-ends", WebhookEvent.RUN_COMPLETED, WebhookEvent.RUN_FAILED)
    starts = _webhook(project.id, "hook-starts", WebhookEvent.RUN_STARTED)
    async with registry_store.write() as tx:
        await tx.insert_webhook(ends)
        await tx.insert_webhook(starts)
        assert (await tx.get_webhook(project.id, "hook-ends")) == ends
        assert [w.id for w in (await tx.list_webhooks(project.id, PAGE)).items] == [
            "hook-ends",
            "hook-starts",
        ]
    seen = Visibility(owner, everything=False)
    for _ in range(2):  # a retried call enqueues nothing more
        for run_id in ("run-1", "run-2"):
            await registry_store.start_run(
                seen, agent.id, run_id, T0, lease=RunLease("s-1", "exec-x", T0 + SECOND)
            )
        await registry_store.finish_run(seen, agent.id, "run-1", T0, completed=True, tokens_used=0, cost=0.0)
        await registry_store.finish_run(seen, agent.id, "run-2", T0, completed=False, tokens_used=0, cost=0.0)
    pending = DeliveryState.PENDING
    assert await _deliveries(registry_store, "hook-ends") == [
        ("run.completed", "run-1", pending, 0),
        ("run.failed", "run-2", pending, 0),
    ]
    assert await _deliveries(registry_store, "hook-starts") == [
        ("run.started", "run-1", pending, 0),
        ("run.started", "run-2", pending, 0),
    ]

    outbox = registry_store.webhook_outbox
    claimed = await outbox.claim(T0, T0 + 10 * SECOND, limit=10)
    assert len(claimed) == 4 and {w.id for _, w in claimed} == {"hook-ends", "hook-starts"}
    assert all(d.session_id == "s-1" for d, _ in claimed)
    assert await outbox.claim(T0 + SECOND, T0 + 10 * SECOND, limit=10) == []  # claimed till then
    by_event = {(d.event, d.run_id): d for d, _ in claimed}
    completed = by_event[(WebhookEvent.RUN_COMPLETED, "run-1")]
    failed = by_event[(WebhookEvent.RUN_FAILED, "run-2")]
    await outbox.settle(completed.id, T0, status_code=200, error="", retry_at=None)
    await outbox.settle(failed.id, T0, status_code=503, error="HTTP 503", retry_at=T0 + 2 * SECOND)
    for delivery, _ in claimed:
        if delivery.event is WebhookEvent.RUN_STARTED:
            await outbox.settle(delivery.id, T0, status_code=0, error="refused", retry_at=None)
    assert await _deliveries(registry_store, "hook-ends") == [
        ("run.completed", "run-1", DeliveryState.DELIVERED, 1),
        ("run.failed", "run-2", pending, 1),
    ]
    assert {state for _, _, state, _ in await _deliveries(registry_store, "hook-starts")} == {
        DeliveryState.FAILED
    }
    (again,) = await outbox.claim(T0 + 2 * SECOND, T0 + 20 * SECOND, limit=10)  # due again, alone
    assert again[0].id == failed.id and again[0].attempts == 1 and again[0].last_error == "HTTP 503"

    async with registry_store.write() as tx:
        await tx.delete_webhook("hook-ends")
        assert (
            await tx.enqueue_webhook_event(project.id, WebhookEvent.TEST, "t-1", T0, webhook_id="hook-starts")
            == 1
        )
    assert await _deliveries(registry_store, "hook-ends") == []
    async with registry_store.write() as tx:
        await tx.delete_project(project.id)
    assert await _deliveries(registry_store, "hook-starts") == []
    assert await outbox.claim(T0 + 60 * SECOND, T0 + 70 * SECOND, limit=10) == []
