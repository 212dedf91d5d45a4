"""The A2A v1.0 HTTP face of every agent (docs/a2a.md): the agent card, JSON-RPC at
`/agents/{project_slug}/{agent_name}/a2a/jsonrpc` and HTTP+JSON under `…/a2a/rest`; and the
gateway's discovery index at its root's well-known URIs.

The card is public when the agent's owner published it: served to anyone, no credential asked.
Any other agent's card is its owner's (and superusers'); to a caller without a credential it
answers exactly as an agent that does not exist.

a2a-sdk's own dispatchers parse, validate (the `A2A-Version` header included), serialize and
stream; each binding route here only applies the gateway's policy (owner or superuser, as every
agent route), resolves the addressed agent (404 before anything A2A) and hands both to the
dispatcher through the call context. The HTTP+JSON routes are the SDK's own table, under the
agent's base path; its `/{tenant}` mount is left out (the path names the agent already).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from a2a.server.routes import create_rest_routes
from fastapi import APIRouter, Depends, Request
from google.protobuf.json_format import MessageToDict
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentmesh.gateway.a2a.card import CARD_PATH, JSONRPC_PATH, REST_PATH, agent_card
from agentmesh.gateway.a2a.catalog import CATALOG_MEDIA_TYPE, CATALOG_PATH, ai_catalog, gateway_card
from agentmesh.gateway.a2a.handler import MeshRequestHandler
from agentmesh.gateway.a2a.published import is_published
from agentmesh.gateway.errors import NoPublicAgent
from agentmesh.gateway.http.a2a_face import A2AFace
from agentmesh.gateway.http.agents import AGENT_BASE, base_url
from agentmesh.gateway.http.context import HttpContext, authorize, authorize_as, context, has_bearer
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.gateway.policy import AGENT_OWNER
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import NotFound, Unavailable

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

    @router.get(CARD_PATH)
    async def a2a_agent_card(
        project_slug: str, agent_name: str, request: Request, ctx: Ctx, caller: Auth
    ) -> dict[str, Any]:
        """The agent's public A2A v1.0 agent card: what it is, its expertise as skills, the URL
        of each binding (JSON-RPC, HTTP+JSON, gRPC with its `tenant`) in `supportedInterfaces`,
        and the security schemes they take. No credential needed when its owner published it
        (`public`); else its owner's, and 404 without one, as for an agent that does not exist."""
        face = _face(ctx)
        ref = AgentRef(project_slug, agent_name)
        spec = await face.published.find(ref)
        if spec is None or not is_published(spec):
            spec = await _owned(request, face, ref)
        card = agent_card(spec, base_url=base_url(ctx, request), grpc_address=face.endpoints.grpc_address)
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


def discovery_router() -> APIRouter:
    """The gateway's discovery index at its root (a2a/catalog.py): no credential needed."""
    router = APIRouter(tags=["A2A"])

    @router.get(CARD_PATH)
    async def gateway_agent_card(request: Request, ctx: Ctx, caller: Auth) -> JSONResponse:
        """The gateway's own A2A agent card: a catalog of the agents its owners published, one
        skill each, with their cards' URLs in its `ai-catalog` extension."""
        base = base_url(ctx, request)
        card = gateway_card(await _face(ctx).published.all(), base_url=base)
        # The AI Catalog's link relation: where the same list is, as a catalog of its own.
        link = f'<{base}{CATALOG_PATH}>; rel="ai-catalog"; type="{CATALOG_MEDIA_TYPE}"'
        return JSONResponse(MessageToDict(card), headers={"Link": link})

    @router.get(
        CATALOG_PATH,
        response_class=JSONResponse,
        responses={200: {"content": {CATALOG_MEDIA_TYPE: {"schema": {"type": "object"}}}}},
    )
    async def gateway_ai_catalog(request: Request, ctx: Ctx, caller: Auth) -> JSONResponse:
        """The agents their owners published, as an AI Catalog: one entry per agent, its `url`
        the agent's public card."""
        catalog = ai_catalog(await _face(ctx).published.all(), base_url=base_url(ctx, request))
        return JSONResponse(catalog, media_type=CATALOG_MEDIA_TYPE)

    return router


async def _owned(request: Request, face: A2AFace, ref: AgentRef) -> resources_pb2.AgentSpec:
    """An unpublished agent's card is its owner's: the caller proves it with a credential.
    Without one, or for an agent the caller may not see, NoPublicAgent, as for none at all."""
    if not has_bearer(request):
        raise NoPublicAgent()
    try:
        caller = await authorize_as(request, AGENT_OWNER)
        return (await face.tasks.agent(caller, ref)).spec
    except NotFound:
        raise NoPublicAgent() from None


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
