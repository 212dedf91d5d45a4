"""Webhooks as a registry resource: a project's owner subscribes an endpoint to the project's run
events (`models.SUBSCRIBABLE`); each event is enqueued, for every subscription asking for it, with
the change it reports (store.py), and delivered by the dispatcher (delivery.py).

The secret that signs deliveries is made here and shown once, in the creation's answer; every
other answer leaves it out. An endpoint is `https`, or `http` when the operator's egress allow-list
names its host (a receiver on this machine or the private network, which the egress policy would
refuse anyway unless allowed): deliveries carry run data and a signature, not for the open wire."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from agentmesh.registry.errors import ValidationFailed, WebhookNotFound
from agentmesh.registry.models import Page
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.validation import update_paths
from agentmesh.registry.webhooks.models import (
    SUBSCRIBABLE,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
    delivery_id,
)
from agentmesh.registry.webhooks.signing import new_secret
from agentmesh.registry.webhooks.task_push import url_violation
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

MAX_DESCRIPTION = 2000
UPDATABLE = ("url", "events", "description")

Clock = Callable[[], datetime]


def without_secret(webhook: Webhook) -> Webhook:
    return webhook.model_copy(update={"secret": ""})


class WebhookRegistry:
    """Subscribes, reads, changes and deletes a project's webhooks, lists their deliveries and
    sends a test event (the project's owner or superusers)."""

    def __init__(
        self, store: RegistryStore, *, page_tokens: PageTokens, clock: Clock, egress: EgressPolicy
    ) -> None:
        self._store = store
        self._pages = page_tokens
        self._clock = clock
        self._egress = egress

    async def create(
        self, principal: Principal, *, project_id: str, url: str, events: Sequence[str], description: str
    ) -> Webhook:
        """The new subscription, with its secret: the only answer that shows it."""
        chosen = await self._check(url=url, events=events, description=description)
        async with self._store.write() as tx:
            await _project(tx, principal, project_id)
            webhook = Webhook(
                id=str(uuid.uuid4()),
                project_id=project_id,
                url=url,
                events=chosen,
                secret=new_secret(),
                description=description,
                created_at=self._clock(),
            )
            return await tx.insert_webhook(webhook)

    async def get(self, principal: Principal, project_id: str, webhook_id: str) -> Webhook:
        async with self._store.read() as tx:
            return without_secret(await _webhook(tx, principal, project_id, webhook_id))

    async def list(
        self,
        principal: Principal,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[Webhook]:
        """One page of the project's webhooks, oldest first."""
        scope = f"webhooks:{project_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await _project(tx, principal, project_id)
            found = await tx.list_webhooks(project_id, request)
        listed = self._pages.page(found, scope=scope)
        return listed.model_copy(update={"items": [without_secret(w) for w in listed.items]})

    async def update(
        self,
        principal: Principal,
        *,
        project_id: str,
        webhook_id: str,
        values: Mapping[str, object],
        mask: Iterable[str],
    ) -> Webhook:
        """Changes the fields `mask` names to their `values` (the secret stays)."""
        paths, violations = update_paths(mask, UPDATABLE)
        if violations:
            raise ValidationFailed.of(violations)
        async with self._store.write() as tx:
            current = await _webhook(tx, principal, project_id, webhook_id)
            changed = {path: values[path] for path in paths}
            url = str(changed.get("url", current.url))
            description = str(changed.get("description", current.description))
            events = changed.get("events", current.events)
            chosen = await self._check(url=url, events=events, description=description)  # type: ignore[arg-type]
            updated = current.model_copy(update={"url": url, "events": chosen, "description": description})
            return without_secret(await tx.update_webhook(updated))

    async def delete(self, principal: Principal, project_id: str, webhook_id: str) -> None:
        """Removes the subscription; its deliveries not made yet are not made."""
        async with self._store.write() as tx:
            await _webhook(tx, principal, project_id, webhook_id)
            await tx.delete_webhook(webhook_id)

    async def deliveries(
        self,
        principal: Principal,
        project_id: str,
        webhook_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[WebhookDelivery]:
        """One page of the subscription's deliveries, in the order their events occurred, each
        with how its attempts went."""
        scope = f"webhook_deliveries:{webhook_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await _webhook(tx, principal, project_id, webhook_id)
            found = await tx.list_webhook_deliveries(webhook_id, request)
        return self._pages.page(found, scope=scope)

    async def send_test(self, principal: Principal, project_id: str, webhook_id: str) -> str:
        """Enqueues a `webhook.test` event for this subscription alone: it is delivered, signed
        and retried like any other. The delivery's id."""
        key = str(uuid.uuid4())
        async with self._store.write() as tx:
            await _webhook(tx, principal, project_id, webhook_id)
            await tx.enqueue_webhook_event(
                project_id, WebhookEvent.TEST, key, self._clock(), webhook_id=webhook_id
            )
        return delivery_id(webhook_id, WebhookEvent.TEST, key)

    async def _check(self, *, url: str, events: Iterable[str], description: str) -> tuple[WebhookEvent, ...]:
        violations: list[FieldViolation] = []
        if violation := await url_violation(self._egress, url, "webhook.url"):
            violations.append(violation)
        names = list(dict.fromkeys(events))
        known = {event.value for event in SUBSCRIBABLE}
        if not names or any(name not in known for name in names):
            violations.append(
                FieldViolation("webhook.events", f"name at least one of {', '.join(sorted(known))}")
            )
        if len(description) > MAX_DESCRIPTION:
            violations.append(FieldViolation("webhook.description", f"at most {MAX_DESCRIPTION} characters"))
        if violations:
            raise ValidationFailed.of(violations)
        return tuple(WebhookEvent(name) for name in names)


async def _project(tx: StoreTransaction, principal: Principal, project_id: str) -> None:
    if not project_id:
        raise ValidationFailed.of([FieldViolation("project_id", "is required")])
    await visible_project(tx, principal, project_id)


async def _webhook(tx: StoreTransaction, principal: Principal, project_id: str, webhook_id: str) -> Webhook:
    await _project(tx, principal, project_id)
    webhook = await tx.get_webhook(project_id, webhook_id)
    if webhook is None:
        raise WebhookNotFound("webhook not found")
    return webhook
