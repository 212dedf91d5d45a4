"""`/api/v1/api-keys`: the signed-in user's API keys over REST, a thin adapter to the registry's
API key RPCs. Creating a key answers its secret, once; nothing else ever shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from google.protobuf import timestamp_pb2
from pydantic import BaseModel, Field

from agentmesh.gateway.http import convert, schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.http.schemas import RequestBody
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]


class ApiKeyCreate(RequestBody):
    """A key to make for the signed-in user."""

    name: str = Field(max_length=100, description="what the key is for")
    project_id: str | None = Field(
        default=None, max_length=200, description="scope the key to this project; none for all"
    )
    expires_at: datetime | None = Field(
        default=None, description="when the key stops working (UTC unless an offset is given); none for never"
    )


class ApiKeyOut(BaseModel):
    id: str
    name: str
    prefix: str = Field(description="the key's first 12 characters, to recognise it by")
    project_id: str | None = Field(description="the one project the key may touch; null for all")
    created_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyOut):
    key: str = Field(description="the API key itself: shown this once, store it now")


def _out(value: resources_pb2.ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=value.id,
        name=value.name,
        prefix=value.prefix,
        project_id=value.project_id or None,
        created_at=convert.timestamp(value.created_at),
        expires_at=convert.timestamp(value.expires_at),
        revoked_at=convert.timestamp(value.revoked_at),
    )


def api_key_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.post("/api-keys", status_code=201, tags=["api keys"])
    async def create_api_key(body: ApiKeyCreate, ctx: Ctx, caller: Auth) -> ApiKeyCreated:
        """Makes an API key for the signed-in user; the answer's `key` is shown only this once.
        404 for a project the user may not see."""
        request = reg.CreateApiKeyRequest(name=body.name, project_id=body.project_id or "")
        if body.expires_at is not None:
            moment = body.expires_at if body.expires_at.tzinfo else body.expires_at.replace(tzinfo=UTC)
            request.expires_at.CopyFrom(timestamp_pb2.Timestamp(seconds=int(moment.timestamp())))
        response = await ctx.call(ctx.registry.stub.CreateApiKey, request, caller)
        return ApiKeyCreated(**_out(response.api_key).model_dump(), key=response.secret)

    @router.get("/api-keys", tags=["api keys"])
    async def list_api_keys(
        ctx: Ctx,
        caller: Auth,
        page: Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")] = 50,
    ) -> schemas.Page[ApiKeyOut]:
        """The signed-in user's API keys, oldest first, revoked ones included; never their secrets."""
        request = reg.ListApiKeysRequest(page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListApiKeys, request, caller)
        return schemas.Page[ApiKeyOut](
            data=[_out(key) for key in response.api_keys],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.delete("/api-keys/{api_key_id}", tags=["api keys"])
    async def revoke_api_key(api_key_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Revokes one of the user's API keys; every gateway refuses it within a second."""
        await ctx.call(ctx.registry.stub.RevokeApiKey, reg.RevokeApiKeyRequest(id=api_key_id), caller)
        return schemas.MessageOut(message=f"API key {api_key_id} revoked")

    return router
