"""`/api/v1/mcp-servers`: registered MCP servers over REST (superusers), a thin adapter to the
registry's MCP server RPCs. Env and header values are write-only: answers show "********", and
sending that back in a PATCH keeps the stored value."""

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
_MASKED = 'values are write-only: shown as "********"'


class McpServerCreate(RequestBody):
    """A server to register: global, or one project's (`project_id`). `env` and `headers` values
    may be `${env:NAME}`, read from the executor's environment when a run connects."""

    name: str = Field(description="a DNS label, unique among the global servers or in the project")
    project_id: str | None = Field(default=None, description="the project it is for; none for global")
    transport: str = Field(description='"stdio" or "streamable_http"')
    command: str = ""
    args: list[str] = Field(default_factory=list)
    url: str = ""
    env: dict[str, str] = Field(default_factory=dict, description="stdio: environment variables")
    headers: dict[str, str] = Field(default_factory=dict, description="streamable_http: HTTP headers")


class McpServerUpdate(RequestBody):
    """Only the fields present change (the project cannot). A map replaces the old one; a value
    of "********" keeps that key's stored value."""

    name: str = _unchanged()
    transport: str = _unchanged()
    command: str = _unchanged()
    args: list[str] = _unchanged()
    url: str = _unchanged()
    env: dict[str, str] = _unchanged()
    headers: dict[str, str] = _unchanged()


class McpServerResourceOut(BaseModel):
    id: str
    name: str
    project_id: str | None = Field(description="null for a global server")
    transport: str
    command: str
    args: list[str]
    url: str
    env: dict[str, str] = Field(description=_MASKED)
    headers: dict[str, str] = Field(description=_MASKED)
    created_at: datetime | None
    updated_at: datetime | None


def _out(value: resources_pb2.McpServer) -> McpServerResourceOut:
    return McpServerResourceOut(
        id=value.id,
        name=value.name,
        project_id=value.project_id or None,
        transport=value.transport,
        command=value.command,
        args=list(value.args),
        url=value.url,
        env=dict(value.env),
        headers=dict(value.headers),
        created_at=convert.timestamp(value.created_at),
        updated_at=convert.timestamp(value.updated_at),
    )


def mcp_server_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    @router.post("/mcp-servers", status_code=201, tags=["mcp servers"])
    async def create_mcp_server(body: McpServerCreate, ctx: Ctx, caller: Auth) -> McpServerResourceOut:
        """Registers an MCP server (superusers). 409 when the name is taken in its scope."""
        fields = body.model_dump()
        fields["project_id"] = fields["project_id"] or ""
        request = reg.CreateMcpServerRequest(mcp_server=resources_pb2.McpServer(**fields))
        return _out((await ctx.call(ctx.registry.stub.CreateMcpServer, request, caller)).mcp_server)

    @router.get("/mcp-servers", tags=["mcp servers"])
    async def list_mcp_servers(
        ctx: Ctx,
        caller: Auth,
        page: Annotated[int, Query(ge=1, le=2**31 - 1, description="1-based page number")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")] = 50,
        project_id: Annotated[str, Query(max_length=200, description="only this project's")] = "",
    ) -> schemas.Page[McpServerResourceOut]:
        """Registered MCP servers, oldest first, paged (superusers)."""
        request = reg.ListMcpServersRequest(page=page, page_size=page_size, project_id=project_id)
        response = await ctx.call(ctx.registry.stub.ListMcpServers, request, caller)
        return schemas.Page[McpServerResourceOut](
            data=[_out(server) for server in response.mcp_servers],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/mcp-servers/{mcp_server_id}", tags=["mcp servers"])
    async def get_mcp_server(mcp_server_id: str, ctx: Ctx, caller: Auth) -> McpServerResourceOut:
        """One registered MCP server (superusers)."""
        request = reg.GetMcpServerRequest(id=mcp_server_id)
        return _out((await ctx.call(ctx.registry.stub.GetMcpServer, request, caller)).mcp_server)

    @router.patch("/mcp-servers/{mcp_server_id}", tags=["mcp servers"])
    async def update_mcp_server(
        mcp_server_id: str, body: McpServerUpdate, ctx: Ctx, caller: Auth
    ) -> McpServerResourceOut:
        """Changes the fields present in the body (superusers)."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            return await get_mcp_server(mcp_server_id, ctx, caller)
        request = reg.UpdateMcpServerRequest(
            mcp_server=resources_pb2.McpServer(id=mcp_server_id, **fields),
            update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)),
        )
        return _out((await ctx.call(ctx.registry.stub.UpdateMcpServer, request, caller)).mcp_server)

    @router.delete("/mcp-servers/{mcp_server_id}", tags=["mcp servers"])
    async def delete_mcp_server(mcp_server_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Removes a registered MCP server (superusers); agents naming it run without its tools."""
        request = reg.DeleteMcpServerRequest(id=mcp_server_id)
        await ctx.call(ctx.registry.stub.DeleteMcpServer, request, caller)
        return schemas.MessageOut(message=f"MCP server {mcp_server_id} deleted")

    return router
