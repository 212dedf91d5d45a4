"""gRPC server bootstrap: one way for every service to start, report health and drain.

`start_server` builds a `grpc.aio` server with the shared interceptors, the standard health
service and server reflection, binds it (port 0 picks a free one) and starts it. `GrpcServer.stop`
drains: health turns NOT_SERVING first, so balancers stop sending new work, then in-flight calls
get the grace period to finish.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from agentmesh.runtime.interceptors import ServerInterceptor

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceBinding:
    """A gRPC service to serve: its full name (for health and reflection) and how to add it."""

    name: str
    add_to_server: Callable[[grpc.aio.Server], None]


class GrpcServer:
    """A started `grpc.aio` server with its health service."""

    def __init__(
        self,
        server: grpc.aio.Server,
        port: int,
        health_servicer: health.aio.HealthServicer,
        service_names: Sequence[str],
        host: str,
    ) -> None:
        self.server = server
        self.port = port
        self.host = host
        self._health = health_servicer
        self._service_names = tuple(service_names)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self._service_names):
            await self._health.set(name, status)

    async def stop(self, grace_seconds: float) -> None:
        """Stops taking new calls and lets in-flight ones finish within the grace period."""
        await self._health.enter_graceful_shutdown()
        await self.server.stop(grace_seconds)

    async def wait_for_termination(self) -> None:
        await self.server.wait_for_termination()


async def start_server(
    services: Sequence[ServiceBinding],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_message_bytes: int = 4 * 1024 * 1024,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> GrpcServer:
    server = grpc.aio.server(
        interceptors=[ServerInterceptor(), *interceptors],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
    )
    for service in services:
        service.add_to_server(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [service.name for service in services]
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {host}:{port}")
    await server.start()
    running = GrpcServer(server, bound, health_servicer, names, host)
    await running.set_serving(True)
    logger.info("serving %s on %s", ", ".join(names), running.address)
    return running


async def wait_for_shutdown_signal() -> None:
    """Returns on the first SIGTERM or SIGINT (Ctrl-C)."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    try:
        await stopped.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
