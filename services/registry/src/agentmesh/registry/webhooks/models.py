"""Webhooks' domain types: a project's subscriptions, and the deliveries of its runs' events to
them (the outbox rows a dispatcher works through)."""

from __future__ import annotations

import enum
import json
from datetime import datetime

from pydantic import field_validator

from agentmesh.registry.models import Model


class WebhookEvent(enum.StrEnum):
    """The run events a subscription may ask for; each is enqueued with the change it reports."""

    RUN_STARTED = "run.started"
    RUN_INPUT_REQUESTED = "run.input_requested"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"
    # Sent only on request, to try an endpoint out; never subscribed to.
    TEST = "webhook.test"


SUBSCRIBABLE = tuple(event for event in WebhookEvent if event is not WebhookEvent.TEST)


class RunOutcome(enum.StrEnum):
    """How a run ended, in its end event's `data.outcome`: a cancel is `run.failed` (what a
    subscriber to failures already expects) told apart from a failure by it."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @classmethod
    def of(cls, *, completed: bool, cancelled: bool = False) -> RunOutcome:
        if completed:
            return cls.COMPLETED
        return cls.CANCELLED if cancelled else cls.FAILED

    @property
    def event(self) -> WebhookEvent:
        return WebhookEvent.RUN_COMPLETED if self is RunOutcome.COMPLETED else WebhookEvent.RUN_FAILED

    @property
    def data(self) -> str:
        """The end event's `data` beyond the run's ids (JSON object text, as deliveries keep it)."""
        return json.dumps({"outcome": self.value})


class Webhook(Model):
    """A project's subscription: `url` is POSTed each event of `events`, signed with `secret`
    (`whsec_` + base64, as Standard Webhooks spell it), which only its creation's answer shows."""

    id: str
    project_id: str
    url: str
    events: tuple[WebhookEvent, ...]
    secret: str
    description: str = ""
    created_at: datetime
    # An A2A push notification config (task_push.py): the run whose task it follows, the config's
    # id as the A2A client named it, the task's A2A id, and what the client asked each request to
    # carry — its token and authentication (scheme and credentials). Empty for a project's webhook.
    run_id: str = ""
    push_config_id: str = ""
    task_id: str = ""
    token: str = ""
    auth_scheme: str = ""
    auth_credentials: str = ""

    @field_validator("events", mode="before")
    @classmethod
    def _stored_events(cls, value: object) -> object:
        # The store keeps them comma-separated (tables.py).
        return tuple(event for event in value.split(",") if event) if isinstance(value, str) else value


class DeliveryState(enum.StrEnum):
    PENDING = "pending"  # due at `next_attempt_at` (again, after a failed attempt)
    DELIVERED = "delivered"  # an attempt was answered 2xx
    FAILED = "failed"  # every attempt failed: no more are made


class WebhookDelivery(Model):
    """One event for one subscription, and how its delivery went. `id` is the Standard Webhooks
    message id (`webhook-id`): the same on every attempt, so a receiver can drop repeats."""

    id: str
    webhook_id: str
    project_id: str
    event: WebhookEvent
    agent_id: str = ""
    run_id: str = ""
    session_id: str = ""
    # More of the event (JSON object text): an input request's kind and id; empty for none.
    data: str = ""
    created_at: datetime  # when the event occurred
    state: DeliveryState = DeliveryState.PENDING
    attempts: int = 0
    next_attempt_at: datetime
    last_attempt_at: datetime | None = None
    # The last attempt's outcome: the HTTP status it got (0: none, the request failed) and why it
    # failed (empty on success). Never the secret nor the receiver's body.
    last_status_code: int = 0
    last_error: str = ""


def delivery_id(webhook_id: str, event: WebhookEvent, key: str) -> str:
    """The id of `event`'s delivery to a subscription, `key` naming the occurrence (the run, or
    the input request): fixed, so enqueuing the same event twice (a retried call) adds nothing.
    The run bookkeeping statements build the same (store/statements.py)."""
    return f"{webhook_id}:{event.value}:{key}"
