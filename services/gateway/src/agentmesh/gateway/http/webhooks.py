"""`/api/v1/projects/{project_id}/webhooks`: a project's webhooks over REST (its owner or
superusers), a thin adapter to the registry's webhook RPCs: subscriptions, their deliveries, and a
test event. The signing secret is in the creation's answer only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from google.protobuf import field_mask_pb2
from pydantic import BaseModel, Field

from agentmesh.gateway.http import convert, schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.http.schemas import RequestBody, _unchanged
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
BASE = "/api/v1/projects/{project_id}/webhooks"
PageNumber = Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")]
PageSize = Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")]
Event = Literal["run.started", "run.input_requested", "run.completed", "run.failed"]


class WebhookCreate(RequestBody):
    """An endpoint to POST the project's run events to, signed as Standard Webhooks do."""

    url: str = Field(description="https (http only to a host the egress allow-list names)")
    events: list[Event] = Field(min_length=1, description="the run events to deliver")
    description: str = ""


class WebhookUpdate(RequestBody):
    """Only the fields present change; the secret stays."""

    url: str = _unchanged()
    events: list[Event] = _unchanged()
    description: str = _unchanged()


class WebhookOut(BaseModel):
    id: str
    project_id: str
    url: str
    events: list[str]
    description: str
    created_at: datetime | None


class WebhookCreated(WebhookOut):
    secret: str = Field(description="signs the deliveries (whsec_ + base64); shown this once")


class DeliveryOut(BaseModel):
    id: str = Field(description="the message id, sent as webhook-id on every attempt")
    webhook_id: str
    event: str
    agent_id: str
    run_id: str
    session_id: str
    state: str = Field(description="pending, delivered or failed")
    attempts: int
    created_at: datetime | None
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    last_status_code: int = Field(description="the last attempt's HTTP status (0: none)")
    last_error: str


class TestEventOut(BaseModel):
    delivery_id: str


def _out(value: resources_pb2.Webhook) -> WebhookOut:
    return WebhookOut(
        id=value.id,
        project_id=value.project_id,
        url=value.url,
        events=list(value.events),
        description=value.description,
        created_at=convert.timestamp(value.created_at),
    )


def _delivery(value: resources_pb2.WebhookDelivery) -> DeliveryOut:
    return DeliveryOut(
        id=value.id,
        webhook_id=value.webhook_id,
        event=value.event,
        agent_id=value.agent_id,
        run_id=value.run_id,
        session_id=value.session_id,
        state=value.state,
        attempts=value.attempts,
        created_at=convert.timestamp(value.created_at),
        next_attempt_at=convert.timestamp(value.next_attempt_at),
        last_attempt_at=convert.timestamp(value.last_attempt_at),
        last_status_code=value.last_status_code,
        last_error=value.last_error,
    )


def webhook_router() -> APIRouter:
    router = APIRouter(prefix=BASE, tags=["webhooks"])

    @router.post("", status_code=201)
    async def create_webhook(project_id: str, body: WebhookCreate, ctx: Ctx, caller: Auth) -> WebhookCreated:
        """Subscribes an endpoint to the project's run events. The answer holds the signing
        secret, which no other answer shows."""
        webhook = resources_pb2.Webhook(project_id=project_id, **body.model_dump())
        made = (
            await ctx.call(ctx.registry.stub.CreateWebhook, reg.CreateWebhookRequest(webhook=webhook), caller)
        ).webhook
        return WebhookCreated(**_out(made).model_dump(), secret=made.secret)

    @router.get("")
    async def list_webhooks(
        project_id: str, ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[WebhookOut]:
        """The project's webhooks, oldest first, paged."""
        request = reg.ListWebhooksRequest(project_id=project_id, page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListWebhooks, request, caller)
        return schemas.Page[WebhookOut](
            data=[_out(webhook) for webhook in response.webhooks],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/{webhook_id}")
    async def get_webhook(project_id: str, webhook_id: str, ctx: Ctx, caller: Auth) -> WebhookOut:
        """One webhook of the project."""
        request = reg.GetWebhookRequest(project_id=project_id, id=webhook_id)
        return _out((await ctx.call(ctx.registry.stub.GetWebhook, request, caller)).webhook)

    @router.patch("/{webhook_id}")
    async def update_webhook(
        project_id: str, webhook_id: str, body: WebhookUpdate, ctx: Ctx, caller: Auth
    ) -> WebhookOut:
        """Changes the fields present in the body."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            return await get_webhook(project_id, webhook_id, ctx, caller)
        request = reg.UpdateWebhookRequest(
            webhook=resources_pb2.Webhook(project_id=project_id, id=webhook_id, **fields),
            update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)),
        )
        return _out((await ctx.call(ctx.registry.stub.UpdateWebhook, request, caller)).webhook)

    @router.delete("/{webhook_id}")
    async def delete_webhook(project_id: str, webhook_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Removes a webhook; its deliveries not made yet are not made."""
        request = reg.DeleteWebhookRequest(project_id=project_id, id=webhook_id)
        await ctx.call(ctx.registry.stub.DeleteWebhook, request, caller)
        return schemas.MessageOut(message=f"webhook {webhook_id} deleted")

    @router.get("/{webhook_id}/deliveries")
    async def list_webhook_deliveries(
        project_id: str,
        webhook_id: str,
        ctx: Ctx,
        caller: Auth,
        page: PageNumber = 1,
        page_size: PageSize = 50,
    ) -> schemas.Page[DeliveryOut]:
        """The webhook's deliveries in the order their events occurred, each with how its
        attempts went."""
        request = reg.ListWebhookDeliveriesRequest(
            project_id=project_id, webhook_id=webhook_id, page=page, page_size=page_size
        )
        response = await ctx.call(ctx.registry.stub.ListWebhookDeliveries, request, caller)
        return schemas.Page[DeliveryOut](
            data=[_delivery(delivery) for delivery in response.deliveries],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.post("/{webhook_id}/test", status_code=202)
    async def test_webhook(project_id: str, webhook_id: str, ctx: Ctx, caller: Auth) -> TestEventOut:
        """Enqueues a `webhook.test` event for this webhook alone, delivered like any other."""
        request = reg.TestWebhookRequest(project_id=project_id, id=webhook_id)
        response = await ctx.call(ctx.registry.stub.TestWebhook, request, caller)
        return TestEventOut(delivery_id=response.delivery_id)

    return router
