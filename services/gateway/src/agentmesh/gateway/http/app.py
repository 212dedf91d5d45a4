"""The FastAPI application of the gateway and the uvicorn server that runs it."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import grpc
import uvicorn
from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from fastapi_offline import FastAPIOffline
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.gateway.console.router import console_router
from agentmesh.gateway.http.a2a import a2a_router, discovery_router
from agentmesh.gateway.http.agent_versions import agent_version_router
from agentmesh.gateway.http.agents import agent_router
from agentmesh.gateway.http.api_keys import api_key_router
from agentmesh.gateway.http.context import HttpContext, authorize
from agentmesh.gateway.http.errors import install_error_handlers
from agentmesh.gateway.http.head import HeadAsGet
from agentmesh.gateway.http.input_requests import input_request_router
from agentmesh.gateway.http.invitations import invitation_router
from agentmesh.gateway.http.limits import BodySizeLimit
from agentmesh.gateway.http.mcp_agents import AgentTools, mcp_router
from agentmesh.gateway.http.mcp_servers import mcp_server_router
from agentmesh.gateway.http.openai import openai_router
from agentmesh.gateway.http.remote_agents import remote_agent_router
from agentmesh.gateway.http.response_actions import response_actions_router
from agentmesh.gateway.http.responses import responses_router
from agentmesh.gateway.http.rest import rest_router
from agentmesh.gateway.http.schedules import schedule_router
from agentmesh.gateway.http.schemas import ErrorOut, HealthOut, ReadinessOut
from agentmesh.gateway.http.usage import usage_router
from agentmesh.gateway.http.webhooks import webhook_router
from agentmesh.gateway.policy import Access, route_rule
from agentmesh.gateway.version import VERSION
from agentmesh.runtime.server import bound_socket
from agentmesh.runtime.tls import PLAINTEXT, TlsFiles

logger = logging.getLogger(__name__)

# Every REST route may answer with these; documented so clients (and schema checkers) expect them.
_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in {
        400: "Malformed request, or an invalid state: a lifecycle transition that is not allowed, a "
        "paused or terminated agent",
        401: "Missing, invalid or expired bearer token",
        403: "Not allowed for this user",
        404: "Not found (also for projects the caller may not see)",
        409: "Conflict: a taken name or slug, a type still in use, a concurrent update, a request "
        "for input answered already",
        413: "Request too large",
        422: "Invalid field; the message names it",
        429: "Rate limited; see Retry-After",
        503: "A service behind the gateway is unavailable",
    }.items()
}


def create_http_app(context: HttpContext, *, max_request_body_bytes: int) -> FastAPI:
    """The gateway's HTTP face. Every route passes the policy table first (`authorize`)."""
    # The projects' agents as MCP servers: the SDK's session manager runs as long as the app does.
    agent_tools = AgentTools(context)
    # /docs and /redoc load their scripts from this package (fastapi-offline), not from a CDN.
    app = FastAPIOffline(
        title="agentmesh gateway",
        version=VERSION,
        description="REST/JSON API, agent endpoints and the OpenAI-compatible API of agentmesh.",
        dependencies=[Depends(authorize)],
        lifespan=agent_tools.running,
    )
    app.state.context = context
    app.state.mcp = agent_tools

    @app.get("/healthz", tags=["health"])
    async def healthz() -> HealthOut:
        """Liveness: the gateway process answers."""
        return HealthOut(status="ok")

    @app.get("/readyz", tags=["health"], responses={503: {"model": ReadinessOut}})
    async def readyz() -> ReadinessOut:
        """Readiness: every service the gateway depends on reports SERVING."""
        results = await asyncio.gather(*(_serving(channel) for _, channel in context.dependencies))
        checks = {
            name: "serving" if ok else "not serving"
            for (name, _), ok in zip(context.dependencies, results, strict=True)
        }
        ready = all(results)
        body = ReadinessOut(status="ready" if ready else "not ready", checks=checks)  # type: ignore[arg-type]
        if not ready:
            return JSONResponse(body.model_dump(), status_code=503)  # type: ignore[return-value]
        return body

    app.include_router(rest_router(), responses=_ERROR_RESPONSES)
    app.include_router(mcp_server_router(), responses=_ERROR_RESPONSES)
    app.include_router(api_key_router(), responses=_ERROR_RESPONSES)
    app.include_router(invitation_router(), responses=_ERROR_RESPONSES)
    app.include_router(remote_agent_router(), responses=_ERROR_RESPONSES)
    app.include_router(webhook_router(), responses=_ERROR_RESPONSES)
    app.include_router(schedule_router(), responses=_ERROR_RESPONSES)
    app.include_router(input_request_router(), responses=_ERROR_RESPONSES)
    app.include_router(usage_router(), responses=_ERROR_RESPONSES)
    app.include_router(agent_version_router(), responses=_ERROR_RESPONSES)
    app.include_router(agent_router(), responses=_ERROR_RESPONSES)
    app.include_router(a2a_router(), responses=_ERROR_RESPONSES)
    app.include_router(discovery_router(), responses=_ERROR_RESPONSES)
    app.include_router(openai_router())
    app.include_router(responses_router())
    app.include_router(response_actions_router())
    app.include_router(console_router())
    app.include_router(mcp_router())
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_request_body_bytes)
    app.add_middleware(HeadAsGet)
    _document_security(app)
    missing = unpoliced_routes(app)
    if missing:
        raise RuntimeError(f"routes without an access policy: {missing}")
    return app


def route_methods(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, included routers' routes too."""
    found: list[tuple[str, str]] = []
    for context in iter_route_contexts(app.routes):
        path = context.path or ""
        # `authorize` finds a route's rule by the matched route's own path: it must be the path
        # the app serves it at (routers carry their prefix themselves, none is added on include).
        if getattr(context.original_route, "path", path) != path:
            raise RuntimeError(f"route {path} is included under an extra prefix")
        found.extend((method, path) for method in sorted(context.methods or ()) if method != "HEAD")
    return found


def unpoliced_routes(app: FastAPI) -> list[tuple[str, str]]:
    return [(method, path) for method, path in route_methods(app) if route_rule(method, path) is None]


def _document_security(app: FastAPI) -> None:
    """OpenAPI says which routes need the bearer token — derived from the policy table."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["bearer"] = {"type": "http", "scheme": "bearer"}
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                rule = route_rule(method.upper(), path)
                if rule is not None and rule.access is not Access.PUBLIC:
                    operation["security"] = [{"bearer": []}]
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _serving(channel: grpc.aio.Channel) -> bool:
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
    except grpc.aio.AioRpcError:
        return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (0 = a free port), as uvicorn would open it."""
    listener = bound_socket(host, port)
    listener.listen(2048)
    listener.setblocking(False)
    return listener


class HttpServer:
    """uvicorn serving an ASGI app inside the running event loop, over TLS (or mutual TLS) when
    `tls` says so."""

    def __init__(
        self,
        app: FastAPI,
        *,
        host: str,
        port: int,
        shutdown_grace_seconds: float = 5.0,
        tls: TlsFiles = PLAINTEXT,
    ) -> None:
        self._scheme = "https" if tls.serves_tls else "http"
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            # The app's lifespan runs what lives as long as it does (the MCP session manager).
            lifespan="on",
            access_log=False,
            # uvicorn would take X-Forwarded-For from any loopback peer (FORWARDED_ALLOW_IPS) and
            # present it as the client; the gateway reads it itself, from trusted proxies only
            # (AGENTMESH_GATEWAY_TRUSTED_PROXIES, gateway/client_address.py).
            proxy_headers=False,
            timeout_graceful_shutdown=max(shutdown_grace_seconds, 0.1),
            **tls.uvicorn_options(),  # type: ignore[arg-type]
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # the process owns signals
        self._task: asyncio.Task[None] | None = None
        self.host = host
        self.port = port

    async def start(self) -> None:
        # The socket is bound here, not by uvicorn, which exits the process when it cannot bind.
        listener = _listen(self.host, self.port)
        self.port = listener.getsockname()[1]
        self._task = asyncio.create_task(self._server.serve(sockets=[listener]))
        while not self._server.started:
            if self._task.done():
                await self._task
                raise OSError(f"HTTP server could not start on {self.host}:{self.port}")
            await asyncio.sleep(0.01)

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self.host}:{self.port}"

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
