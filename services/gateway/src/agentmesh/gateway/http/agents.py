"""Agent runtime endpoints (DESIGN §6), base `/agents/{project_slug}/{agent_name}` where the agent
is named by its slug or its exact name: health, agent cards and the agent's memory. Its
OpenAI-compatible endpoints live in `openai.py`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from agentmesh.gateway.http import convert, schemas, session_schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import Caller
from agentmesh.gateway.version import VERSION
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_reg
from agentmesh.memory.client import event_type_from_name
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.registry.v1 import resources_pb2

AGENT_BASE = "/agents/{project_slug}/{agent_name}"

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]

_HEALTH = {
    resources_pb2.AGENT_STATUS_IDLE: "healthy",
    resources_pb2.AGENT_STATUS_WORKING: "healthy",
    resources_pb2.AGENT_STATUS_WAITING: "healthy",  # a run waits for a person; new ones start
    resources_pb2.AGENT_STATUS_PAUSED: "paused",
    resources_pb2.AGENT_STATUS_TERMINATED: "terminated",
}


async def resolve_agent(
    ctx: HttpContext, caller: Caller, project_slug: str, agent_name: str
) -> resources_pb2.AgentSpec:
    """The agent with its type's settings resolved, as the caller may see it (404 otherwise)."""
    request = internal_reg.ResolveAgentRequest(project_slug=project_slug, agent_name=agent_name)
    return (await ctx.call(ctx.registry.internal_stub.ResolveAgent, request, caller)).spec


def capabilities(spec: resources_pb2.AgentSpec) -> list[str]:
    """What an agent card claims: every agent streams; tool calling when it has tools; task
    delegation exactly when it may delegate to another agent."""
    found = ["streaming"]
    if spec.tools or spec.mcp_servers:
        found.append("tool_calling")
    if spec.network_access:
        found.append("task_delegation")
    return found


def base_url(ctx: HttpContext, request: Request) -> str:
    return (ctx.public_url or str(request.base_url)).rstrip("/")


def agent_router() -> APIRouter:
    router = APIRouter(prefix=AGENT_BASE, tags=["agent endpoints"])

    @router.get("/health")
    async def agent_health(
        project_slug: str, agent_name: str, ctx: Ctx, caller: Auth
    ) -> schemas.AgentHealthOut:
        """Whether the agent takes work: `healthy` (idle, working or waiting), `paused` or `terminated`."""
        spec = await resolve_agent(ctx, caller, project_slug, agent_name)
        status = _HEALTH.get(spec.agent.status, "unknown")
        return schemas.AgentHealthOut(
            status=status,  # type: ignore[arg-type]
            name=spec.agent.name,
            slug=spec.agent.slug,
        )

    @router.get("/.well-known/agent")
    async def agent_card(
        project_slug: str, agent_name: str, request: Request, ctx: Ctx, caller: Auth
    ) -> schemas.AgentCardOut:
        """The agent card: what the agent is and can do."""
        spec = await resolve_agent(ctx, caller, project_slug, agent_name)
        return schemas.AgentCardOut(
            name=spec.agent.name,
            slug=spec.agent.slug,
            description=spec.description,
            url=f"{base_url(ctx, request)}/agents/{spec.project_slug}/{spec.agent.slug}",
            version=VERSION,
            capabilities=capabilities(spec),  # type: ignore[arg-type]
            skills=list(spec.expertise),
        )

    @router.get("/memory/events")
    async def agent_events(
        project_slug: str,
        agent_name: str,
        ctx: Ctx,
        caller: Auth,
        session_id: Annotated[str, Query(max_length=128, description="only this session's events")] = "",
        event_type: Annotated[
            list[schemas.EventTypeName] | None, Query(description="only these event types (repeatable)")
        ] = None,
        page_size: Annotated[int, Query(ge=1, le=1000)] = 100,
        page_token: Annotated[str, Query(max_length=4096)] = "",
    ) -> session_schemas.AgentEventsOut:
        """The events this agent recorded, across its sessions or in one, in `seq` order."""
        spec = await resolve_agent(ctx, caller, project_slug, agent_name)
        if session_id:
            await ctx.gateway.check_session(caller, spec.agent.project_id, session_id)
        request = mem.ListEventsRequest(
            session_id=session_id,
            # Sessions are named within their project: two projects may use one session id.
            project_id=spec.agent.project_id,
            # Events name their agent by slug.
            agent=spec.agent.slug,
            event_types=[event_type_from_name(name) for name in event_type or ()],
            page_size=page_size,
            page_token=page_token,
            include_total_size=True,
        )
        response = await ctx.call(ctx.memory.stub.ListEvents, request, caller)
        return session_schemas.AgentEventsOut(
            total=response.total_size,
            events=[convert.event(e) for e in response.events],
            next_page_token=response.next_page_token,
            byte_limit_reached=response.byte_limit_reached,
        )

    return router
