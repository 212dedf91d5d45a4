"""`/api/v1/invitations`: invitations to register over REST (superusers), a thin adapter to the
registry's invitation RPCs. Creating one answers its token, once; nothing else ever shows it. They
matter while the registry's registration mode is `invite-only`: registering then presents one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from agentmesh.gateway.http import convert, schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.http.schemas import RequestBody
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
MAX_TTL_SECONDS = 90 * 24 * 3600


class InvitationCreate(RequestBody):
    """An invitation to issue."""

    ttl_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_TTL_SECONDS,
        description="how long it stays valid, in seconds (at most 90 days); 0 for the registry's default",
    )


class InvitationOut(BaseModel):
    id: str
    created_by: str = Field(description="the superuser who issued it")
    created_at: datetime | None
    expires_at: datetime | None
    used_at: datetime | None = Field(description="when someone registered with it; null while unused")
    revoked_at: datetime | None


class InvitationCreated(InvitationOut):
    token: str = Field(description="the token to register with: shown this once, pass it on now")


def _out(value: resources_pb2.Invitation) -> InvitationOut:
    return InvitationOut(
        id=value.id,
        created_by=value.created_by,
        created_at=convert.timestamp(value.created_at),
        expires_at=convert.timestamp(value.expires_at),
        used_at=convert.timestamp(value.used_at),
        revoked_at=convert.timestamp(value.revoked_at),
    )


def invitation_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.post("/invitations", status_code=201, tags=["auth"])
    async def create_invitation(body: InvitationCreate, ctx: Ctx, caller: Auth) -> InvitationCreated:
        """Issues a single-use invitation to register (superusers); the answer's `token` is shown
        only this once. The person invited registers with it as `invitation_token`."""
        request = reg.CreateInvitationRequest(ttl_seconds=body.ttl_seconds)
        response = await ctx.call(ctx.registry.stub.CreateInvitation, request, caller)
        return InvitationCreated(**_out(response.invitation).model_dump(), token=response.token)

    @router.get("/invitations", tags=["auth"])
    async def list_invitations(
        ctx: Ctx,
        caller: Auth,
        page: Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")] = 50,
    ) -> schemas.Page[InvitationOut]:
        """Invitations, oldest first, used, revoked and expired ones included; never their tokens
        (superusers)."""
        request = reg.ListInvitationsRequest(page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListInvitations, request, caller)
        return schemas.Page[InvitationOut](
            data=[_out(invitation) for invitation in response.invitations],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.delete("/invitations/{invitation_id}", tags=["auth"])
    async def revoke_invitation(invitation_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Revokes an unused invitation (superusers). 404 for an unknown one."""
        request = reg.RevokeInvitationRequest(id=invitation_id)
        await ctx.call(ctx.registry.stub.RevokeInvitation, request, caller)
        return schemas.MessageOut(message=f"invitation {invitation_id} revoked")

    return router
