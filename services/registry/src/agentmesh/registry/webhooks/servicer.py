"""The webhook RPCs of RegistryService: proto in, proto out, mixed into `RegistryServicer`.
CreateWebhook's answer alone carries the secret (the rules leave it out of every other)."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2
from agentmesh.registry.webhooks.models import Webhook, WebhookDelivery
from agentmesh.registry.webhooks.registry import WebhookRegistry
from agentmesh.registry.webhooks.task_push import TaskPushConfigs
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


def webhook_message(webhook: Webhook) -> resources_pb2.Webhook:
    message = resources_pb2.Webhook(
        id=webhook.id,
        project_id=webhook.project_id,
        url=webhook.url,
        events=[event.value for event in webhook.events],
        secret=webhook.secret,
        description=webhook.description,
    )
    message.created_at.FromDatetime(webhook.created_at)
    return message


def delivery_message(delivery: WebhookDelivery) -> resources_pb2.WebhookDelivery:
    message = resources_pb2.WebhookDelivery(
        id=delivery.id,
        webhook_id=delivery.webhook_id,
        event=delivery.event.value,
        agent_id=delivery.agent_id,
        run_id=delivery.run_id,
        session_id=delivery.session_id,
        state=delivery.state.value,
        attempts=delivery.attempts,
        last_status_code=delivery.last_status_code,
        last_error=delivery.last_error,
    )
    message.created_at.FromDatetime(delivery.created_at)
    message.next_attempt_at.FromDatetime(delivery.next_attempt_at)
    if delivery.last_attempt_at is not None:
        message.last_attempt_at.FromDatetime(delivery.last_attempt_at)
    return message


class WebhookRpcs:
    """Adapts the webhook RPCs to `WebhookRegistry`."""

    _webhooks: WebhookRegistry

    async def CreateWebhook(
        self, request: pb.CreateWebhookRequest, context: Context
    ) -> pb.CreateWebhookResponse:
        given = request.webhook
        webhook = await self._webhooks.create(
            caller(),
            project_id=given.project_id,
            url=given.url,
            events=list(given.events),
            description=given.description,
        )
        return pb.CreateWebhookResponse(webhook=webhook_message(webhook))

    async def GetWebhook(self, request: pb.GetWebhookRequest, context: Context) -> pb.GetWebhookResponse:
        webhook = await self._webhooks.get(caller(), request.project_id, request.id)
        return pb.GetWebhookResponse(webhook=webhook_message(webhook))

    async def ListWebhooks(
        self, request: pb.ListWebhooksRequest, context: Context
    ) -> pb.ListWebhooksResponse:
        found = await self._webhooks.list(
            caller(),
            request.project_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListWebhooksResponse(
            webhooks=[webhook_message(w) for w in found.items],
            next_page_token=found.next_page_token,
            total_size=found.total_size,
        )

    async def UpdateWebhook(
        self, request: pb.UpdateWebhookRequest, context: Context
    ) -> pb.UpdateWebhookResponse:
        given = request.webhook
        webhook = await self._webhooks.update(
            caller(),
            project_id=given.project_id,
            webhook_id=given.id,
            values={"url": given.url, "events": list(given.events), "description": given.description},
            mask=request.update_mask.paths,
        )
        return pb.UpdateWebhookResponse(webhook=webhook_message(webhook))

    async def DeleteWebhook(
        self, request: pb.DeleteWebhookRequest, context: Context
    ) -> pb.DeleteWebhookResponse:
        await self._webhooks.delete(caller(), request.project_id, request.id)
        return pb.DeleteWebhookResponse()

    async def ListWebhookDeliveries(
        self, request: pb.ListWebhookDeliveriesRequest, context: Context
    ) -> pb.ListWebhookDeliveriesResponse:
        found = await self._webhooks.deliveries(
            caller(),
            request.project_id,
            request.webhook_id,
            page_size=request.page_size,
            page_token=request.page_token,
            page=request.page,
        )
        return pb.ListWebhookDeliveriesResponse(
            deliveries=[delivery_message(d) for d in found.items],
            next_page_token=found.next_page_token,
            total_size=found.total_size,
        )

    async def TestWebhook(self, request: pb.TestWebhookRequest, context: Context) -> pb.TestWebhookResponse:
        delivery_id = await self._webhooks.send_test(caller(), request.project_id, request.id)
        return pb.TestWebhookResponse(delivery_id=delivery_id)


def task_push_message(config: Webhook) -> internal_pb.TaskPushConfig:
    message = internal_pb.TaskPushConfig(
        id=config.push_config_id,
        project_id=config.project_id,
        run_id=config.run_id,
        task_id=config.task_id,
        url=config.url,
        token=config.token,
        auth_scheme=config.auth_scheme,
        auth_credentials=config.auth_credentials,
    )
    message.create_time.FromDatetime(config.created_at)
    return message


class TaskPushRpcs:
    """The A2A push notification config RPCs of RegistryInternalService, mixed into its servicer:
    adapts them to `TaskPushConfigs`."""

    _task_push: TaskPushConfigs

    async def SetTaskPushConfig(
        self, request: internal_pb.SetTaskPushConfigRequest, context: Context
    ) -> internal_pb.SetTaskPushConfigResponse:
        given = request.config
        config = Webhook(
            id="",
            project_id=given.project_id,
            url=given.url,
            events=(),
            secret="",
            created_at=datetime.now(UTC),
            run_id=given.run_id,
            push_config_id=given.id,
            task_id=given.task_id,
            token=given.token,
            auth_scheme=given.auth_scheme,
            auth_credentials=given.auth_credentials,
        )
        stored = await self._task_push.set(
            caller(),
            config,
            agent_id=given.agent_id,
            session_id=request.session_id,
            catch_up=list(request.catch_up_events),
            input_request_id=request.catch_up_input_request_id,
            cancelled=request.catch_up_cancelled,
            validate_only=request.validate_only,
        )
        return internal_pb.SetTaskPushConfigResponse(config=task_push_message(stored))

    async def GetTaskPushConfig(
        self, request: internal_pb.GetTaskPushConfigRequest, context: Context
    ) -> internal_pb.GetTaskPushConfigResponse:
        found = await self._task_push.get(caller(), request.project_id, request.run_id, request.id)
        return internal_pb.GetTaskPushConfigResponse(config=task_push_message(found))

    async def ListTaskPushConfigs(
        self, request: internal_pb.ListTaskPushConfigsRequest, context: Context
    ) -> internal_pb.ListTaskPushConfigsResponse:
        found = await self._task_push.list(caller(), request.project_id, request.run_id)
        return internal_pb.ListTaskPushConfigsResponse(configs=[task_push_message(c) for c in found])

    async def DeleteTaskPushConfig(
        self, request: internal_pb.DeleteTaskPushConfigRequest, context: Context
    ) -> internal_pb.DeleteTaskPushConfigResponse:
        await self._task_push.delete(caller(), request.project_id, request.run_id, request.id)
        return internal_pb.DeleteTaskPushConfigResponse()
