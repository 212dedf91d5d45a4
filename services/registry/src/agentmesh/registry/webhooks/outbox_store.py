"""The webhooks' outbox as their dispatcher works through it (`WebhookOutboxStore`,
`RegistryStore.webhook_outbox`), on the registry's SQL engines and in memory.

A claim takes due deliveries for a while (their next attempt moved to the end of the claim), so
replicas of the registry sharing a database do not POST the same one at once; a claim that dies
with its replica ends by itself, and the delivery is due again: at least once, never lost."""

from __future__ import annotations

import abc
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.tables import WebhookDeliveryRow, WebhookRow
from agentmesh.registry.webhooks.models import DeliveryState, Webhook, WebhookDelivery

Claimed = tuple[WebhookDelivery, Webhook]


class WebhookOutboxStore(abc.ABC):
    """Deliveries due, claimed and settled."""

    @abc.abstractmethod
    async def claim(self, now: datetime, until: datetime, limit: int) -> list[Claimed]:
        """Up to `limit` pending deliveries due at `now` (oldest due first), each with its
        subscription, claimed until `until`: nobody else claims them before then."""

    @abc.abstractmethod
    async def settle(
        self,
        delivery_id: str,
        now: datetime,
        *,
        status_code: int,
        error: str,
        retry_at: datetime | None,
    ) -> None:
        """Records an attempt made at `now`: delivered when `error` is empty, else due again at
        `retry_at`, or failed for good when that is None."""


def _settled(
    delivery: WebhookDelivery, now: datetime, status_code: int, error: str, retry_at: datetime | None
) -> dict[str, object]:
    """The columns an attempt changes."""
    if not error:
        state = DeliveryState.DELIVERED
    else:
        state = DeliveryState.PENDING if retry_at is not None else DeliveryState.FAILED
    return {
        "state": state,
        "attempts": delivery.attempts + 1,
        "last_attempt_at": now,
        "last_status_code": status_code,
        "last_error": error,
        "next_attempt_at": retry_at or delivery.next_attempt_at,
    }


class SqlWebhookOutboxStore(WebhookOutboxStore):
    """WebhookOutboxStore on the registry's SQL engines (`write_engine` begins write transactions)."""

    def __init__(self, engine: AsyncEngine, *, write_engine: AsyncEngine) -> None:
        self._engine = engine
        self._write_engine = write_engine

    async def claim(self, now: datetime, until: datetime, limit: int) -> list[Claimed]:
        table = WebhookDeliveryRow.__table__
        due = (
            sa.select(table)
            .where(table.c.state == DeliveryState.PENDING.value, table.c.next_attempt_at <= now)
            .order_by(table.c.next_attempt_at)
            .limit(limit)
        )
        claimed: list[WebhookDelivery] = []
        async with self._write_engine.begin() as connection:
            for row in (await connection.execute(due)).all():
                delivery = WebhookDelivery.model_validate(row._mapping)
                # Taken only if still due: a concurrent claim moved its next attempt past `now`.
                taken = await connection.execute(
                    sa.update(table)
                    .where(
                        table.c.id == delivery.id, table.c.state == "pending", table.c.next_attempt_at <= now
                    )
                    .values(next_attempt_at=until)
                )
                if taken.rowcount == 1:
                    claimed.append(delivery.model_copy(update={"next_attempt_at": until}))
            ids = {delivery.webhook_id for delivery in claimed}
            hooks = WebhookRow.__table__
            found = await connection.execute(sa.select(hooks).where(hooks.c.id.in_(ids))) if ids else []
            webhooks = {row.id: Webhook.model_validate(row._mapping) for row in found}
        return [
            (delivery, webhooks[delivery.webhook_id])
            for delivery in claimed
            if delivery.webhook_id in webhooks
        ]

    async def settle(
        self,
        delivery_id: str,
        now: datetime,
        *,
        status_code: int,
        error: str,
        retry_at: datetime | None,
    ) -> None:
        table = WebhookDeliveryRow.__table__
        async with self._write_engine.begin() as connection:
            row = (await connection.execute(sa.select(table).where(table.c.id == delivery_id))).first()
            if row is None:  # its subscription was deleted meanwhile
                return
            delivery = WebhookDelivery.model_validate(row._mapping)
            values = _settled(delivery, now, status_code, error, retry_at)
            await connection.execute(sa.update(table).where(table.c.id == delivery_id).values(**values))


class InMemoryWebhookOutboxStore(WebhookOutboxStore):
    """WebhookOutboxStore on the in-memory store's state: changes in a `draft` of it."""

    def __init__(
        self,
        *,
        draft: Callable[[], AbstractAsyncContextManager[State]],
        current: Callable[[], State],
    ) -> None:
        self._draft = draft
        self._current = current

    async def claim(self, now: datetime, until: datetime, limit: int) -> list[Claimed]:
        async with self._draft() as state:
            due = sorted(
                (
                    d
                    for d in state.webhook_deliveries.values()
                    if d.state is DeliveryState.PENDING and d.next_attempt_at <= now
                ),
                key=lambda d: d.next_attempt_at,
            )[:limit]
            claimed: list[Claimed] = []
            for delivery in due:
                taken = state.webhook_deliveries[delivery.id] = delivery.model_copy(
                    update={"next_attempt_at": until}
                )
                claimed.append((taken, state.webhooks[delivery.webhook_id]))
        return claimed

    async def settle(
        self,
        delivery_id: str,
        now: datetime,
        *,
        status_code: int,
        error: str,
        retry_at: datetime | None,
    ) -> None:
        async with self._draft() as state:
            delivery = state.webhook_deliveries.get(delivery_id)
            if delivery is not None:
                values = _settled(delivery, now, status_code, error, retry_at)
                state.webhook_deliveries[delivery_id] = delivery.model_copy(update=values)
