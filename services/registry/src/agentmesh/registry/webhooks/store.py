"""Storing webhooks: the transaction methods (`WebhookTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. Subscriptions, and the deliveries (the outbox) a project can read; a run's start
and end enqueue theirs inside the run bookkeeping statements (store/statements.py), an input request
inside its suspension (runs/input_store.py); the dispatcher's claims are `outbox_store.py`'s."""

from __future__ import annotations

import abc
import json
from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import PageRequest, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.runs.input_models import InputRequest
from agentmesh.registry.tables import WebhookDeliveryRow, WebhookRow
from agentmesh.registry.webhooks.models import (
    Webhook,
    WebhookDelivery,
    WebhookEvent,
    delivery_id,
)


class WebhookTransaction(abc.ABC):
    """The webhook operations of one transaction. Reads return None for what does not exist."""

    @abc.abstractmethod
    async def insert_webhook(self, webhook: Webhook) -> Webhook: ...

    @abc.abstractmethod
    async def get_webhook(self, project_id: str, webhook_id: str) -> Webhook | None: ...

    @abc.abstractmethod
    async def list_webhooks(self, project_id: str, page: PageRequest) -> Slice[Webhook]:
        """One page of the project's subscriptions in (`created_at`, `id`) order."""

    @abc.abstractmethod
    async def update_webhook(self, webhook: Webhook) -> Webhook: ...

    @abc.abstractmethod
    async def delete_webhook(self, webhook_id: str) -> None:
        """Removes the subscription and its deliveries (those not made yet are not made)."""

    @abc.abstractmethod
    async def list_webhook_deliveries(self, webhook_id: str, page: PageRequest) -> Slice[WebhookDelivery]:
        """One page of the subscription's deliveries in (`created_at`, `id`) order: as they occurred."""

    @abc.abstractmethod
    async def task_push_configs(self, project_id: str, run_id: str) -> list[Webhook]:
        """The A2A push notification configs of the run's task, oldest first."""

    @abc.abstractmethod
    async def enqueue_webhook_event(
        self,
        project_id: str,
        event: WebhookEvent,
        key: str,
        now: datetime,
        *,
        agent_id: str = "",
        run_id: str = "",
        session_id: str = "",
        data: str = "",
        webhook_id: str = "",
    ) -> int:
        """Enqueues `event` (its occurrence named by `key`) for each of the project's
        subscriptions that asks for it — for `webhook_id`'s only, whatever it asks for, when
        given — due at once; one already enqueued stays as it is. How many it enqueued."""


def _columns(webhook: Webhook) -> dict[str, object]:
    return {**webhook.model_dump(exclude={"events"}), "events": ",".join(webhook.events)}


def _wants(webhook: Webhook, event: WebhookEvent, webhook_id: str, run_id: str, *, task_only: bool) -> bool:
    if webhook_id:
        return webhook.id == webhook_id
    if task_only:  # the run's task's push configs, not the project's webhooks
        return bool(run_id) and webhook.run_id == run_id
    # A task's push notification config follows its own run only.
    return event in webhook.events and webhook.run_id in ("", run_id)


def _new_delivery(
    webhook: Webhook, event: WebhookEvent, key: str, now: datetime, **fields: str
) -> WebhookDelivery:
    return WebhookDelivery(
        id=delivery_id(webhook.id, event, key),
        webhook_id=webhook.id,
        project_id=webhook.project_id,
        event=event,
        created_at=now,
        next_attempt_at=now,
        **fields,
    )


class SqlWebhooks(WebhookTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers it uses."""

    _session: AsyncSession

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        self._session.add(WebhookRow(**_columns(webhook)))
        await self._session.flush()
        return webhook

    async def update_webhook(self, webhook: Webhook) -> Webhook:
        values = _columns(webhook)
        await self._session.execute(sa.update(WebhookRow).where(WebhookRow.id == webhook.id).values(**values))
        return webhook

    async def get_webhook(self, project_id: str, webhook_id: str) -> Webhook | None:
        statement = sa.select(WebhookRow).where(
            WebhookRow.project_id == project_id, WebhookRow.id == webhook_id, WebhookRow.run_id == ""
        )
        row = (await self._session.execute(statement)).scalars().first()
        return from_row(Webhook, row) if row else None

    async def list_webhooks(self, project_id: str, page: PageRequest) -> Slice[Webhook]:
        conditions = [WebhookRow.project_id == project_id, WebhookRow.run_id == ""]
        return await self._slice(WebhookRow, conditions, page, Webhook)  # type: ignore[attr-defined,no-any-return]

    async def delete_webhook(self, webhook_id: str) -> None:
        await self._session.execute(
            sa.delete(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id == webhook_id)
        )
        await self._session.execute(sa.delete(WebhookRow).where(WebhookRow.id == webhook_id))

    async def delete_project_webhooks(self, project_id: str) -> None:
        """With its project: a project's subscriptions and deliveries go."""
        for table in (WebhookDeliveryRow, WebhookRow):
            await self._session.execute(sa.delete(table).where(table.project_id == project_id))

    async def task_push_configs(self, project_id: str, run_id: str) -> list[Webhook]:
        statement = (
            sa.select(WebhookRow)
            .where(WebhookRow.project_id == project_id, WebhookRow.run_id == run_id)
            .order_by(WebhookRow.created_at, WebhookRow.id)
        )
        return [from_row(Webhook, row) for row in (await self._session.execute(statement)).scalars()]

    async def list_webhook_deliveries(self, webhook_id: str, page: PageRequest) -> Slice[WebhookDelivery]:
        conditions = [WebhookDeliveryRow.webhook_id == webhook_id]
        return await self._slice(WebhookDeliveryRow, conditions, page, WebhookDelivery)  # type: ignore[attr-defined,no-any-return]

    async def enqueue_webhook_event(
        self,
        project_id: str,
        event: WebhookEvent,
        key: str,
        now: datetime,
        *,
        agent_id: str = "",
        run_id: str = "",
        session_id: str = "",
        data: str = "",
        webhook_id: str = "",
    ) -> int:
        connection = await self._session.connection()
        return await enqueue_on(
            connection,
            project_id,
            event,
            key,
            now,
            webhook_id=webhook_id,
            agent_id=agent_id,
            run_id=run_id,
            session_id=session_id,
            data=data,
        )


async def enqueue_on(
    connection: AsyncConnection,
    project_id: str,
    event: WebhookEvent,
    key: str,
    now: datetime,
    *,
    webhook_id: str = "",
    task_only: bool = False,
    **fields: str,
) -> int:
    """`enqueue_webhook_event` on an SQL connection, in its transaction: also what a run's
    suspension calls, in the transaction that suspends it (runs/input_store.py). `task_only`:
    for the push configs of the task that is the run `fields` names, not the project's webhooks."""
    rows = await connection.execute(sa.select(WebhookRow).where(WebhookRow.project_id == project_id))
    deliveries = [
        _new_delivery(webhook, event, key, now, **fields)
        for webhook in (from_row(Webhook, row) for row in rows)
        if _wants(webhook, event, webhook_id, fields.get("run_id", ""), task_only=task_only)
    ]
    if not deliveries:
        return 0
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(WebhookDeliveryRow).on_conflict_do_nothing(index_elements=["id"])
    await connection.execute(statement, [delivery.model_dump() for delivery in deliveries])
    return len(deliveries)


def input_requested(request: InputRequest) -> dict[str, str]:
    """What `run.input_requested` carries for a run's new request for input (enqueued with the
    request's id as its occurrence): what a receiver needs to answer it, not the question's text,
    which may say more than a subscription should carry."""
    data = {"input_request_id": request.id, "kind": request.kind.value, "tool": request.tool}
    data["expires_at"] = request.expires_at.isoformat()
    return {
        "agent_id": request.agent_id,
        "run_id": request.run_id,
        "session_id": request.session_id,
        "data": json.dumps(data),
    }


def enqueue_in_memory(
    state: State,
    project_id: str,
    event: WebhookEvent,
    key: str,
    now: datetime,
    *,
    webhook_id: str = "",
    task_only: bool = False,
    **fields: str,
) -> int:
    """`enqueue_webhook_event` on the in-memory store's state (a write's draft): also what its
    run bookkeeping and suspensions call, in the same draft as the change they report."""
    count = 0
    for webhook in state.webhooks.values():
        if webhook.project_id == project_id and _wants(
            webhook, event, webhook_id, fields.get("run_id", ""), task_only=task_only
        ):
            delivery = _new_delivery(webhook, event, key, now, **fields)
            state.webhook_deliveries.setdefault(delivery.id, delivery)
            count += 1
    return count


class InMemoryWebhooks(WebhookTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `webhooks`
    and `webhook_deliveries`."""

    _state: State

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        self._state.webhooks[webhook.id] = webhook
        return webhook

    async def get_webhook(self, project_id: str, webhook_id: str) -> Webhook | None:
        webhook = self._state.webhooks.get(webhook_id)
        if webhook is None or webhook.project_id != project_id or webhook.run_id:
            return None
        return webhook

    async def list_webhooks(self, project_id: str, page: PageRequest) -> Slice[Webhook]:
        hooks = self._state.webhooks.values()
        return keyset_slice([w for w in hooks if w.project_id == project_id and not w.run_id], page)

    async def update_webhook(self, webhook: Webhook) -> Webhook:
        self._state.webhooks[webhook.id] = webhook
        return webhook

    async def delete_webhook(self, webhook_id: str) -> None:
        self._state.webhooks.pop(webhook_id, None)
        self._drop_deliveries(lambda delivery: delivery.webhook_id == webhook_id)

    async def delete_project_webhooks(self, project_id: str) -> None:
        for webhook_id in [w.id for w in self._state.webhooks.values() if w.project_id == project_id]:
            del self._state.webhooks[webhook_id]
        self._drop_deliveries(lambda delivery: delivery.project_id == project_id)

    def _drop_deliveries(self, matches: Callable[[WebhookDelivery], bool]) -> None:
        deliveries = self._state.webhook_deliveries
        for delivery_id_ in [d.id for d in deliveries.values() if matches(d)]:
            del deliveries[delivery_id_]

    async def task_push_configs(self, project_id: str, run_id: str) -> list[Webhook]:
        hooks = self._state.webhooks.values()
        found = [w for w in hooks if w.project_id == project_id and run_id and w.run_id == run_id]
        return sorted(found, key=lambda w: (w.created_at, w.id))

    async def list_webhook_deliveries(self, webhook_id: str, page: PageRequest) -> Slice[WebhookDelivery]:
        deliveries = self._state.webhook_deliveries.values()
        return keyset_slice([d for d in deliveries if d.webhook_id == webhook_id], page)

    async def enqueue_webhook_event(
        self,
        project_id: str,
        event: WebhookEvent,
        key: str,
        now: datetime,
        *,
        agent_id: str = "",
        run_id: str = "",
        session_id: str = "",
        data: str = "",
        webhook_id: str = "",
    ) -> int:
        return enqueue_in_memory(
            self._state,
            project_id,
            event,
            key,
            now,
            webhook_id=webhook_id,
            agent_id=agent_id,
            run_id=run_id,
            session_id=session_id,
            data=data,
        )
