"""The FastAPI application of the gateway and the uvicorn server that runs it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import grpc
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from grpc_health.v1 import health_pb2, health_pb2_grpc

logger = logging.getLogger(__name__)


def create_http_app(*, dependencies: Sequence[tuple[str, grpc.aio.Channel]]) -> FastAPI:
    """`dependencies` are the peers `/readyz` checks: (name, channel) pairs."""
    app = FastAPI(title="agentmesh gateway", version="0.1.0")

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """Liveness: the gateway process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> JSONResponse:
        """Readiness: every service the gateway depends on reports SERVING."""
        results = await asyncio.gather(*(_serving(channel) for _, channel in dependencies))
        checks = {
            name: "serving" if ok else "not serving"
            for (name, _), ok in zip(dependencies, results, strict=True)
        }
        ready = all(results)
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
        )

    return app


async def _serving(channel: grpc.aio.Channel) -> bool:
    try:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
    except grpc.aio.AioRpcError:
        return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


class HttpServer:
    """uvicorn serving an ASGI app inside the running event loop."""

    def __init__(self, app: FastAPI, *, host: str, port: int) -> None:
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the process owns signal handling
        self._task: asyncio.Task[None] | None = None
        self.host = host
        self.port = port

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                await self._task
                raise OSError(f"HTTP server could not start on {self.host}:{self.port}")
            await asyncio.sleep(0.01)
        sockets = [s for server in self._server.servers for s in server.sockets]
        self.port = sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
