"""Delivering webhooks: a loop that claims the outbox's due deliveries (outbox_store.py), POSTs
each signed (signing.py) through the egress policy, and settles it — delivered on a 2xx answer,
else due again after an exponential backoff, or failed for good after the last attempt.

The outbox is rows, not memory: a delivery enqueued before a restart (or claimed by a replica
that died) is made after it. A receiver may get an event more than once (at least once: an
attempt whose answer was lost is made again), with the same `webhook-id` each time.

A2A push notification configs (task_push.py) are deliveries of the same outbox: their body is
the task's status update and their headers the A2A client's token and authentication.

What an attempt records — the status it got, or why the request failed — never holds the
secret, the signature or the receiver's answer: only what the project's owner may read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx

from agentmesh.registry.webhooks.models import Webhook, WebhookDelivery
from agentmesh.registry.webhooks.outbox_store import WebhookOutboxStore
from agentmesh.registry.webhooks.signing import signed_headers
from agentmesh.registry.webhooks.task_push import push_notification
from agentmesh.runtime.egress import EgressRefused

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class DeliveryPolicy:
    """How hard the dispatcher tries: `max_attempts` per delivery, the n-th retry after
    `backoff_seconds`·2ⁿ⁻¹ (at most `max_backoff_seconds`); each attempt may take
    `timeout_seconds`, and a claim lasts longer than that, so an attempt ends before its
    delivery can be claimed again."""

    max_attempts: int = 8
    backoff_seconds: float = 5.0
    max_backoff_seconds: float = 3600.0
    timeout_seconds: float = 10.0
    poll_seconds: float = 1.0
    batch: int = 50

    def retry_at(self, now: datetime, attempts: int) -> datetime | None:
        """When to try again after `attempts` failed attempts; None when they were the last."""
        if attempts >= self.max_attempts:
            return None
        delay = min(self.backoff_seconds * 2 ** (attempts - 1), self.max_backoff_seconds)
        return now + timedelta(seconds=delay)


def body_of(delivery: WebhookDelivery) -> bytes:
    """The delivery's JSON body, the same on every attempt: the event's `type`, when it
    occurred, and its `data` (Standard Webhooks' recommended shape)."""
    data: dict[str, object] = {"project_id": delivery.project_id}
    for name in ("agent_id", "run_id", "session_id"):
        if value := getattr(delivery, name):
            data[name] = value
    if delivery.data:
        data.update(json.loads(delivery.data))
    payload = {"type": delivery.event.value, "timestamp": delivery.created_at.isoformat(), "data": data}
    return json.dumps(payload, separators=(",", ":")).encode()


class WebhookDispatcher:
    """Works through the webhooks' outbox until stopped (see the module's docstring)."""

    def __init__(
        self,
        outbox: WebhookOutboxStore,
        *,
        client: httpx.AsyncClient,
        policy: DeliveryPolicy,
        clock: Clock,
    ) -> None:
        self._outbox = outbox
        self._client = client
        self._policy = policy
        self._now = clock
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="webhook-dispatcher")

    def wake(self) -> None:
        """Something was enqueued: look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            try:
                made = await self.deliver_due()
            except Exception:  # the database away for a moment: try again at the next poll
                logger.exception("webhook deliveries could not be claimed")
                made = 0
            if made:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._policy.poll_seconds)

    async def deliver_due(self) -> int:
        """Makes one attempt at each delivery due now (at most a batch); how many it attempted."""
        now = self._now()
        until = now + timedelta(seconds=self._policy.timeout_seconds * 2 + self._policy.poll_seconds)
        claimed = await self._outbox.claim(now, until, self._policy.batch)
        await asyncio.gather(*(self._attempt(delivery, webhook) for delivery, webhook in claimed))
        return len(claimed)

    async def _attempt(self, delivery: WebhookDelivery, webhook: Webhook) -> None:
        if webhook.run_id:  # an A2A task's push notification config
            body, headers = push_notification(delivery, webhook)
        else:
            body = body_of(delivery)
            headers = signed_headers(webhook.secret, delivery.id, int(self._now().timestamp()), body)
        headers["content-type"] = "application/json"
        status, error = 0, ""
        try:
            response = await self._client.post(
                webhook.url, content=body, headers=headers, timeout=self._policy.timeout_seconds
            )
            status = response.status_code
            if not 200 <= status < 300:
                error = f"the endpoint answered HTTP {status}"
        except EgressRefused as refused:
            error = str(refused)
        except httpx.TimeoutException:
            error = f"no answer within {self._policy.timeout_seconds:g} s"
        except httpx.HTTPError as failed:
            error = f"the request failed: {type(failed).__name__}"
        retry_at = self._policy.retry_at(self._now(), delivery.attempts + 1) if error else None
        logger.info(
            "webhook delivery %s (%s) attempt %d: %s",
            delivery.id,
            delivery.event.value,
            delivery.attempts + 1,
            error or f"delivered, HTTP {status}",
        )
        await self._outbox.settle(
            delivery.id, self._now(), status_code=status, error=error, retry_at=retry_at
        )
