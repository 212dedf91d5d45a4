"""`/api/v1/projects/{project_id}/remote-agents`: a project's remote A2A agents over REST (its
owner or superusers), a thin adapter to the registry's remote agent RPCs. The credential is
write-only: answers show "********" when one is set."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

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
BASE = "/api/v1/projects/{project_id}/remote-agents"


class RemoteAgentCreate(RequestBody):
    """A remote A2A agent for the project's agents to delegate to (name it in network_access)."""

    name: str = Field(description="a DNS label no agent or remote agent of the project has")
    card_url: str = Field(description="URL of its A2A agent card (http or https)")
    credential: str = Field(default="", description="bearer token sent to it; write-only")
    description: str = ""


class RemoteAgentUpdate(RequestBody):
    """Only the fields present change. A credential of "********" (what reads show) keeps the
    stored one; "" removes it."""

    name: str = _unchanged()
    card_url: str = _unchanged()
    credential: str = _unchanged()
    description: str = _unchanged()


class RemoteAgentOut(BaseModel):
    id: str
    project_id: str
    name: str
    card_url: str
    credential: str = Field(description='write-only: "********" when one is set')
    description: str
    created_at: datetime | None


def _out(value: resources_pb2.RemoteAgent) -> RemoteAgentOut:
    return RemoteAgentOut(
        id=value.id,
        project_id=value.project_id,
        name=value.name,
        card_url=value.card_url,
        credential=value.credential,
        description=value.description,
        created_at=convert.timestamp(value.created_at),
    )


def remote_agent_router() -> APIRouter:
    router = APIRouter(prefix=BASE, tags=["remote agents"])

    @router.post("", status_code=201)
    async def create_remote_agent(
        project_id: str, body: RemoteAgentCreate, ctx: Ctx, caller: Auth
    ) -> RemoteAgentOut:
        """Registers a remote A2A agent in the project. 409 when the name is taken."""
        remote = resources_pb2.RemoteAgent(project_id=project_id, **body.model_dump())
        request = reg.CreateRemoteAgentRequest(remote_agent=remote)
        return _out((await ctx.call(ctx.registry.stub.CreateRemoteAgent, request, caller)).remote_agent)

    @router.get("")
    async def list_remote_agents(
        project_id: str,
        ctx: Ctx,
        caller: Auth,
        page: Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")] = 50,
    ) -> schemas.Page[RemoteAgentOut]:
        """The project's remote A2A agents, oldest first, paged."""
        request = reg.ListRemoteAgentsRequest(project_id=project_id, page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListRemoteAgents, request, caller)
        return schemas.Page[RemoteAgentOut](
            data=[_out(remote) for remote in response.remote_agents],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/{remote_agent_id}")
    async def get_remote_agent(
        project_id: str, remote_agent_id: str, ctx: Ctx, caller: Auth
    ) -> RemoteAgentOut:
        """One remote A2A agent of the project."""
        request = reg.GetRemoteAgentRequest(project_id=project_id, id=remote_agent_id)
        return _out((await ctx.call(ctx.registry.stub.GetRemoteAgent, request, caller)).remote_agent)

    @router.patch("/{remote_agent_id}")
    async def update_remote_agent(
        project_id: str, remote_agent_id: str, body: RemoteAgentUpdate, ctx: Ctx, caller: Auth
    ) -> RemoteAgentOut:
        """Changes the fields present in the body. 409 when the new name is taken."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            return await get_remote_agent(project_id, remote_agent_id, ctx, caller)
        request = reg.UpdateRemoteAgentRequest(
            remote_agent=resources_pb2.RemoteAgent(project_id=project_id, id=remote_agent_id, **fields),
            update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)),
        )
        return _out((await ctx.call(ctx.registry.stub.UpdateRemoteAgent, request, caller)).remote_agent)

    @router.delete("/{remote_agent_id}")
    async def delete_remote_agent(
        project_id: str, remote_agent_id: str, ctx: Ctx, caller: Auth
    ) -> schemas.MessageOut:
        """Removes a remote A2A agent; agents naming it get a refused delegation."""
        request = reg.DeleteRemoteAgentRequest(project_id=project_id, id=remote_agent_id)
        await ctx.call(ctx.registry.stub.DeleteRemoteAgent, request, caller)
        return schemas.MessageOut(message=f"remote agent {remote_agent_id} deleted")

    return router
