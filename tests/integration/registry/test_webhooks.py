"""Webhooks through the registry's RPCs, on both databases: every run event a subscription asks
for reaches a loopback receiver (allowed by the egress allow-list), signed so that the official
Standard Webhooks library verifies it; a receiver that fails gets the event again after a backoff,
each attempt's outcome readable; a delivery enqueued before the registry restarts is made after it;
the secret is shown once; plain http only to what the egress allow-list names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf import timestamp_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.registry.app import start
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import service_channel
from tests.integration.registry.support import (
    JWT_SECRET,
    Api,
    Worker,
    bearer,
    make_settings,
    rpc_error,
    violation_fields,
)
from tests.polling import eventually
from tests.webhook_receiver import Receiver, webhook_receiver

EVENTS = ["run.started", "run.input_requested", "run.completed", "run.failed"]
# A claim outlasts an attempt's timeout: a registry stopped mid-attempt leaves its claim to
# expire, which the restart test waits out.
FAST = {
    "egress_allow": ["127.0.0.0/8"],
    "webhook_backoff_seconds": 0.05,
    "webhook_poll_seconds": 0.05,
    "webhook_timeout_seconds": 2.0,
}


@pytest.fixture
async def registry_service(database_url: str) -> AsyncIterator[RunningService]:
    service = await start(make_settings(database_url, **FAST))
    yield service
    await service.stop(0)


async def _worker(channel: grpc.aio.Channel) -> Worker:
    api = Api(pb_grpc.RegistryServiceStub(channel))
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    return Worker(owner, project, agent, bearer(TokenCodec(JWT_SECRET).system_token()))


async def _subscribe(
    stub: pb_grpc.RegistryServiceStub, worker: Worker, receiver: Receiver
) -> resources_pb2.Webhook:
    webhook = resources_pb2.Webhook(project_id=worker.project.id, url=receiver.url, events=EVENTS)
    request = reg.CreateWebhookRequest(webhook=webhook)
    return (await stub.CreateWebhook(request, metadata=worker.owner.metadata)).webhook


def _moment(at: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(at)
    return stamp


async def test_every_run_event_arrives_signed_and_retried(registry_service: RunningService) -> None:
    async with (
        service_channel(registry_service.address, JWT_SECRET) as channel,
        webhook_receiver(503, 503) as receiver,
    ):
        stub, client = pb_grpc.RegistryServiceStub(channel), RegistryClient(channel)
        worker = await _worker(channel)
        webhook = await _subscribe(stub, worker, receiver)
        assert webhook.secret.startswith("whsec_")
        agent, system = worker.agent.id, worker.system

        for run_id in ("run-done", "run-broken", "run-asking"):
            await client.start_agent_run(
                agent, run_id, session_id="s-1", executor_id="exec-x", metadata=system
            )
        await client.finish_agent_run(agent, "run-done", completed=True, metadata=system)
        await client.finish_agent_run(agent, "run-broken", completed=False, metadata=system)
        question = run_pb2.InputRequest(
            id="ask-1",
            kind=run_pb2.INPUT_KIND_QUESTION,
            question="Which folder?",
            expires_at=_moment(datetime.now(UTC) + timedelta(hours=1)),
        )
        await client.suspend_run(
            agent, "run-asking", executor_id="exec-x", requests=[question], metadata=system
        )

        await eventually(lambda: _arrived(receiver, 6), what="six events delivered")
        # At least once: a receiver drops repeats by their webhook-id.
        unique = {request.headers["webhook-id"]: request for request in receiver.delivered()}
        payloads = [request.verified(webhook.secret) for request in unique.values()]
        events = sorted((p["type"], p["data"]["run_id"]) for p in payloads)
        assert events == [
            ("run.completed", "run-done"),
            ("run.failed", "run-broken"),
            ("run.input_requested", "run-asking"),
            ("run.started", "run-asking"),
            ("run.started", "run-broken"),
            ("run.started", "run-done"),
        ]
        asked = next(p for p in payloads if p["type"] == "run.input_requested")
        assert asked["data"]["input_request_id"] == "ask-1" and asked["data"]["kind"] == "question"
        assert all(p["data"]["session_id"] == "s-1" and p["data"]["agent_id"] == agent for p in payloads)

        # The two refusals were retried with the same message id, and the deliveries say so.
        failed = [request for request in receiver.received if request.status == 503]
        assert len(failed) == 2
        delivered_ids = {request.headers["webhook-id"] for request in receiver.delivered()}
        assert {request.headers["webhook-id"] for request in failed} <= delivered_ids
        listing = reg.ListWebhookDeliveriesRequest(project_id=worker.project.id, webhook_id=webhook.id)

        async def settled() -> bool:
            nonlocal listed
            listed = await stub.ListWebhookDeliveries(listing, metadata=worker.owner.metadata)
            return {d.state for d in listed.deliveries} == {"delivered"}

        listed = reg.ListWebhookDeliveriesResponse()
        await eventually(settled, what="every delivery recorded as delivered")
        assert len(listed.deliveries) == 6
        assert sum(d.attempts for d in listed.deliveries) >= 8
        assert all(d.last_status_code == 200 and not d.last_error for d in listed.deliveries)

        # The secret was shown once.
        got = await stub.GetWebhook(
            reg.GetWebhookRequest(project_id=worker.project.id, id=webhook.id), metadata=worker.owner.metadata
        )
        assert got.webhook.secret == "" and got.webhook.url == receiver.url

        # Plain http only where the egress allow-list says; only the run events.
        for url, events, wrong in (
            ("http://example.com/hook", EVENTS, "webhook.url"),
            ("https://example.com/hook", ["run.paused"], "webhook.events"),
        ):
            refused = resources_pb2.Webhook(project_id=worker.project.id, url=url, events=events)
            error = await rpc_error(
                stub.CreateWebhook(reg.CreateWebhookRequest(webhook=refused), metadata=worker.owner.metadata)
            )
            assert violation_fields(error) == {wrong}


async def test_a_runs_end_says_its_outcome_and_a_cancel_is_not_a_failure(
    registry_service: RunningService,
) -> None:
    async with (
        service_channel(registry_service.address, JWT_SECRET) as channel,
        webhook_receiver() as receiver,
    ):
        stub, client = pb_grpc.RegistryServiceStub(channel), RegistryClient(channel)
        worker = await _worker(channel)
        webhook = await _subscribe(stub, worker, receiver)
        agent, system = worker.agent.id, worker.system
        for run_id in ("run-done", "run-broken", "run-cancelled", "run-both"):
            await client.start_agent_run(
                agent, run_id, session_id="s-1", executor_id="exec-x", metadata=system
            )
        await client.finish_agent_run(agent, "run-done", completed=True, metadata=system)
        await client.finish_agent_run(agent, "run-broken", completed=False, metadata=system)
        await client.finish_agent_run(
            agent, "run-cancelled", completed=False, cancelled=True, metadata=system
        )
        # Completed and cancelled at once is a bad report: refused naming the field, nothing recorded.
        error = await rpc_error(
            client.finish_agent_run(agent, "run-both", completed=True, cancelled=True, metadata=system)
        )
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and violation_fields(error) == {"cancelled"}

        await eventually(lambda: _arrived(receiver, 7), what="four starts and three ends delivered")
        unique = {request.headers["webhook-id"]: request for request in receiver.delivered()}
        ends = {
            p["data"]["run_id"]: (p["type"], p["data"]["outcome"])
            for p in (request.verified(webhook.secret) for request in unique.values())
            if p["type"] != "run.started"
        }
        # A cancel is `run.failed` (what a subscriber to failures expects) with its own outcome.
        assert ends == {
            "run-done": ("run.completed", "completed"),
            "run-broken": ("run.failed", "failed"),
            "run-cancelled": ("run.failed", "cancelled"),
        }
        # The refused run is still in flight: its real end is recorded later.
        await client.finish_agent_run(agent, "run-both", completed=False, cancelled=True, metadata=system)
        await eventually(lambda: _arrived(receiver, 8), what="the refused run's later end delivered")


async def _arrived(receiver: Receiver, count: int) -> bool:
    return len({request.headers["webhook-id"] for request in receiver.delivered()}) >= count


async def test_a_delivery_enqueued_before_a_restart_is_made_after_it(tmp_path: Path) -> None:
    # The outbox's rows on either database are covered above; a restart is costly: on SQLite only.
    settings = make_settings(f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}", **FAST)
    async with webhook_receiver(*[503] * 1000) as receiver:
        registry = await start(settings)
        try:
            async with service_channel(registry.address, JWT_SECRET) as channel:
                stub = pb_grpc.RegistryServiceStub(channel)
                worker = await _worker(channel)
                webhook = await _subscribe(stub, worker, receiver)
                test = reg.TestWebhookRequest(project_id=worker.project.id, id=webhook.id)
                sent = await stub.TestWebhook(test, metadata=worker.owner.metadata)
                await eventually(lambda: _attempted(receiver), what="a first attempt")
        finally:
            await registry.stop(0)
        receiver.failures.clear()  # the receiver is back, the registry is not
        registry = await start(settings.model_copy(update={"port": 0}))
        try:
            await eventually(lambda: _arrived(receiver, 1), what="the delivery after the restart")
        finally:
            await registry.stop(0)
    delivered = receiver.delivered()[0]  # at least once: maybe more
    assert delivered.headers["webhook-id"] == sent.delivery_id
    assert delivered.verified(webhook.secret)["type"] == "webhook.test"


async def _attempted(receiver: Receiver) -> bool:
    return bool(receiver.received)
