"""A2A push notification configs: a webhook bound to one task — its run — that the gateway's A2A
face sets, reads, lists and deletes for a client who may read the task (the gateway checks that
against the task's log; here the project must be visible to the caller).

A config is a `webhooks` row with a `run_id`, so the run's start, suspension and end enqueue its
deliveries in the same statement or transaction as the change (store/statements.py), and the one
dispatcher delivers them (delivery.py) with the A2A body and headers instead of a signature. Its id
is the client's (or a new one), unique per task: setting it again replaces it.

The client's token and credentials are kept as given (they must be sent back); every answer but
the one that sets the config leaves the credentials out, and no log line or error carries either."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import urlparse

from agentmesh.registry.errors import ValidationFailed, WebhookNotFound
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.webhooks.models import (
    SUBSCRIBABLE,
    RunOutcome,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

MAX_URL = 2000
MAX_ID = 200
MAX_SECRET = 4000
Clock = Callable[[], datetime]
# Config ids are the client's, unique per task; the row's id is derived from the task and the id.
_ROW_IDS = uuid.UUID("6d1b8a52-3c55-4f39-9d7e-5a3c2f0e7b11")
# The A2A task state each run event puts the task in.
TASK_STATES = {
    WebhookEvent.RUN_STARTED: "TASK_STATE_WORKING",
    WebhookEvent.RUN_INPUT_REQUESTED: "TASK_STATE_INPUT_REQUIRED",
    WebhookEvent.RUN_COMPLETED: "TASK_STATE_COMPLETED",
    WebhookEvent.RUN_FAILED: "TASK_STATE_FAILED",
}
# A run's end whose `data.outcome` is `cancelled` (models.py `RunOutcome`) cancelled the task.
CANCELED = "TASK_STATE_CANCELED"
TOKEN_HEADER = "X-A2A-Notification-Token"


def without_credentials(config: Webhook) -> Webhook:
    return config.model_copy(update={"auth_credentials": ""})


async def url_violation(egress: EgressPolicy, url: str, field: str) -> FieldViolation | None:
    """What is wrong with `url` as an endpoint the mesh will POST a tenant's data to, or None:
    `https`, or `http` to a host the egress allow-list names, and not an address the egress policy
    refuses (checked again at every attempt). Webhooks and push configs alike."""
    parsed = urlparse(url)
    plain_allowed = parsed.scheme == "http" and egress.allow_listed(parsed.hostname or "")
    if len(url) > MAX_URL or not parsed.hostname or not (parsed.scheme == "https" or plain_allowed):
        rule = (
            f"must be an https URL of at most {MAX_URL} characters "
            "(http only to a host the egress allow-list names)"
        )
        return FieldViolation(field, rule)
    refusal = await egress.refusal(url)
    return FieldViolation(field, refusal) if refusal else None


def push_notification(delivery: WebhookDelivery, config: Webhook) -> tuple[bytes, dict[str, str]]:
    """An A2A push notification's body and headers: the task's status update as the A2A
    `StreamResponse` JSON (the same on every attempt), with the client's token in
    `X-A2A-Notification-Token` and its authentication as `Authorization: <scheme> <credentials>`."""
    status = {"state": _task_state(delivery)}
    status["timestamp"] = delivery.created_at.isoformat().replace("+00:00", "Z")
    update = {"taskId": config.task_id, "contextId": delivery.session_id, "status": status}
    body = json.dumps({"statusUpdate": update}, separators=(",", ":")).encode()
    headers = {"webhook-id": delivery.id}  # the same on every attempt: a receiver drops repeats
    if config.token:
        headers[TOKEN_HEADER] = config.token
    if config.auth_scheme and config.auth_credentials:
        headers["authorization"] = f"{config.auth_scheme} {config.auth_credentials}"
    return body, headers


class TaskPushConfigs:
    """Sets, reads, lists and deletes the A2A push notification configs of a task (a run)."""

    def __init__(self, store: RegistryStore, *, clock: Clock, egress: EgressPolicy) -> None:
        self._store = store
        self._clock = clock
        self._egress = egress

    async def set(
        self,
        principal: Principal,
        config: Webhook,
        *,
        agent_id: str = "",
        session_id: str = "",
        catch_up: Sequence[str] = (),
        input_request_id: str = "",
        cancelled: bool = False,
        validate_only: bool = False,
    ) -> Webhook:
        """Stores `config` (its project, run, task, url, token, authentication, and its id — a
        new one when empty), replacing the task's config of that id. `catch_up` names the events
        the task went through already (`run.started`, …: a config given with the message that
        started the run is stored once the run started): enqueued for this config alone, with the
        run's `agent_id` and `session_id` and the ids the run's own statements would give them, so
        none is delivered twice; `input_request_id` names the request a suspension already
        enqueued `run.input_requested` for; `cancelled`: the end among them, `run.failed`, was a
        cancel. `validate_only`: checked, not stored."""
        await self._check(config, run_required=not validate_only)
        events = [
            (WebhookEvent(name), config.run_id, _end_data(WebhookEvent(name), cancelled=cancelled))
            for name in catch_up
            if name in {e.value for e in SUBSCRIBABLE}
        ]
        if input_request_id:  # a suspension's occurrence is its request
            events.append((WebhookEvent.RUN_INPUT_REQUESTED, input_request_id, ""))
        config_id = config.push_config_id or str(uuid.uuid4())
        now = self._clock()
        stored = config.model_copy(
            update={
                "id": str(uuid.uuid5(_ROW_IDS, f"{config.project_id}/{config.run_id}/{config_id}")),
                "push_config_id": config_id,
                "events": SUBSCRIBABLE,
                "secret": "",
                "created_at": now,
            }
        )
        if validate_only:
            async with self._store.read() as tx:
                await _project(tx, principal, config.project_id)
            return stored
        async with self._store.write() as tx:
            await _project(tx, principal, config.project_id)
            # Setting an id again replaces its config; its notifications not sent yet stay due.
            if any(c.id == stored.id for c in await tx.task_push_configs(config.project_id, config.run_id)):
                await tx.update_webhook(stored)
            else:
                await tx.insert_webhook(stored)
            for event, key, data in events:
                await tx.enqueue_webhook_event(
                    config.project_id,
                    event,
                    key,
                    now,
                    webhook_id=stored.id,
                    agent_id=agent_id,
                    run_id=config.run_id,
                    session_id=session_id,
                    data=data,
                )
        return stored

    async def get(self, principal: Principal, project_id: str, run_id: str, config_id: str) -> Webhook:
        for config in await self.list(principal, project_id, run_id):
            if config.push_config_id == config_id:
                return config
        raise WebhookNotFound(f"the task has no push notification config {config_id!r}")

    async def list(self, principal: Principal, project_id: str, run_id: str) -> list[Webhook]:
        async with self._store.read() as tx:
            await _project(tx, principal, project_id)
            found = await tx.task_push_configs(project_id, run_id)
        return [without_credentials(config) for config in found]

    async def delete(self, principal: Principal, project_id: str, run_id: str, config_id: str) -> None:
        """Removes the config; its deliveries not made yet are not made."""
        async with self._store.write() as tx:
            await _project(tx, principal, project_id)
            for config in await tx.task_push_configs(project_id, run_id):
                if config.push_config_id == config_id:
                    await tx.delete_webhook(config.id)
                    return
        raise WebhookNotFound(f"the task has no push notification config {config_id!r}")

    async def _check(self, config: Webhook, *, run_required: bool) -> None:
        violations: list[FieldViolation] = []
        required = {"project_id": config.project_id, "run_id": config.run_id if run_required else "-"}
        for field, value in required.items():
            if not value:
                violations.append(FieldViolation(field, "is required"))
        if violation := await url_violation(self._egress, config.url, "url"):
            violations.append(violation)
        if len(config.push_config_id) > MAX_ID:
            violations.append(FieldViolation("id", f"at most {MAX_ID} characters"))
        for field, value in (
            ("token", config.token),
            ("authentication.scheme", config.auth_scheme),
            ("authentication.credentials", config.auth_credentials),
        ):
            if len(value) > MAX_SECRET:
                violations.append(FieldViolation(field, f"at most {MAX_SECRET} characters"))
        if violations:
            raise ValidationFailed.of(violations)


def _end_data(event: WebhookEvent, *, cancelled: bool) -> str:
    """A caught-up end's `data`, as the run's own end statement gives it (its outcome)."""
    if event is WebhookEvent.RUN_COMPLETED:
        return RunOutcome.COMPLETED.data
    if event is WebhookEvent.RUN_FAILED:
        return RunOutcome.of(completed=False, cancelled=cancelled).data
    return ""


def _task_state(delivery: WebhookDelivery) -> str:
    outcome = json.loads(delivery.data).get("outcome") if delivery.data else None
    if delivery.event is WebhookEvent.RUN_FAILED and outcome == RunOutcome.CANCELLED:
        return CANCELED
    return TASK_STATES.get(delivery.event, "TASK_STATE_UNSPECIFIED")


async def _project(tx: StoreTransaction, principal: Principal, project_id: str) -> None:
    await visible_project(tx, principal, project_id)
