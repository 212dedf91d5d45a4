"""The A2A v1.0 HTTP face of every agent (docs/a2a.md): the agent card, JSON-RPC at
`/agents/{project_slug}/{agent_name}/a2a/jsonrpc` and HTTP+JSON under `…/a2a/rest`.

a2a-sdk's own dispatchers parse, validate (the `A2A-Version` header included), serialize and
stream; each route here only applies the gateway's policy (owner or superuser, as every agent
route), resolves the addressed agent (404 before anything A2A) and hands both to the dispatcher
through the call context. The HTTP+JSON routes are the SDK's own table, under the agent's base
path; its `/{tenant}` mount is left out (the path names the agent already).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from a2a.server.routes import create_rest_routes
from fastapi import APIRouter, Depends, Request
from google.protobuf.json_format import MessageToDict
from starlette.responses import Response
from starlette.routing import Route

from agentmesh.gateway.a2a.card import JSONRPC_PATH, REST_PATH, agent_card
from agentmesh.gateway.a2a.handler import MeshRequestHandler
from agentmesh.gateway.http.a2a_face import A2AFace
from agentmesh.gateway.http.agents import AGENT_BASE, base_url
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.runtime.errors import Unavailable

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]


def _rest_table() -> list[tuple[str, list[str], str]]:
    """The SDK's HTTP+JSON routes as (path, methods, RestDispatcher method name)."""
    routes = create_rest_routes(MeshRequestHandler.__new__(MeshRequestHandler))
    return [
        (route.path, sorted(route.methods - {"HEAD"}), route.endpoint.__name__)
        for route in routes
        if isinstance(route, Route) and route.methods
    ]


REST_ROUTES = _rest_table()


def a2a_paths() -> list[tuple[str, str]]:
    """(method, path under the agent's base) of every A2A binding route (for the policy table)."""
    rest = [(method, REST_PATH + path) for path, methods, _ in REST_ROUTES for method in methods]
    return [("POST", JSONRPC_PATH), *rest]


def a2a_router() -> APIRouter:
    router = APIRouter(prefix=AGENT_BASE, tags=["A2A"])

    @router.get("/.well-known/agent-card.json")
    async def a2a_agent_card(
        project_slug: str, agent_name: str, request: Request, ctx: Ctx, caller: Auth
    ) -> dict[str, Any]:
        """The agent's A2A v1.0 agent card: its skills, and the URL of each binding (JSON-RPC,
        HTTP+JSON, gRPC) in `supportedInterfaces`."""
        face = _face(ctx)
        agent = await face.tasks.agent(caller, AgentRef(project_slug, agent_name))
        card = agent_card(
            agent.spec, base_url=base_url(ctx, request), grpc_address=face.endpoints.grpc_address
        )
        return MessageToDict(card)

    def agent_route(
        dispatch: Callable[[A2AFace, Request], Awaitable[Response]],
        requested_status: Callable[[Request], Awaitable[object]],
    ) -> Callable[..., Any]:
        async def route(
            project_slug: str, agent_name: str, request: Request, ctx: Ctx, caller: Auth
        ) -> Response:
            face = _face(ctx)
            request.state.a2a_caller = caller
            request.state.a2a_agent = await face.tasks.agent(caller, AgentRef(project_slug, agent_name))
            request.state.a2a_base_url = base_url(ctx, request)
            request.state.a2a_requested_status = await requested_status(request)
            return await dispatch(face, request)

        return route

    router.add_api_route(
        JSONRPC_PATH,
        agent_route(lambda face, request: face.jsonrpc.handle_requests(request), _jsonrpc_list_status),
        methods=["POST"],
        include_in_schema=False,
    )
    for path, methods, name in REST_ROUTES:
        router.add_api_route(
            REST_PATH + path,
            agent_route(
                lambda face, request, name=name: getattr(face.rest, name)(request),
                _rest_list_status if name == "list_tasks" else _no_status,
            ),
            methods=methods,
            include_in_schema=False,
        )
    return router


# The `status` filter of a ListTasks call as the client wrote it (see handler.REQUESTED_STATUS):
# the SDK's parsers read an unknown state name as "no filter".


async def _jsonrpc_list_status(request: Request) -> object:
    try:
        body = json.loads(await request.body())  # Starlette keeps the body for the dispatcher
    except ValueError:
        return None  # the dispatcher answers the parse error
    if not isinstance(body, dict) or body.get("method") != "ListTasks":
        return None
    params = body.get("params")
    return params.get("status") if isinstance(params, dict) else None


async def _rest_list_status(request: Request) -> object:
    return request.query_params.get("status")


async def _no_status(request: Request) -> object:
    return None


def _face(ctx: HttpContext) -> A2AFace:
    if ctx.a2a is None:
        raise Unavailable("A2A is not set up on this gateway")
    return ctx.a2a
