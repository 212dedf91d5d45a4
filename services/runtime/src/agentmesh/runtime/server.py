"""gRPC server bootstrap: one way for every service to start, report health and drain.

`bind_server` builds a `grpc.aio` server with the shared interceptors and binds it (port 0 picks a
free one), so a composition root knows its port before it builds what depends on it (an executor
advertises its address); `GrpcServer.start` adds the services, the standard health service and
server reflection (`grpc.reflection.v1` and `v1alpha`), and starts it. `start_server` does both at
once. `GrpcServer.stop` drains: health turns NOT_SERVING first, so balancers stop sending new work,
then in-flight calls get the grace period to finish.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

from agentmesh.runtime import metrics
from agentmesh.runtime.interceptors import ServerInterceptor
from agentmesh.runtime.message_counts import message_counter
from agentmesh.runtime.settings import DEFAULT_MAX_PENDING_CALLS, ServiceSettings
from agentmesh.runtime.tls import PLAINTEXT, TlsFiles

logger = logging.getLogger(__name__)

# Calls that arrived and wait for the server's event loop to take them up
# (`ServiceSettings.max_pending_calls`, DEFAULT_MAX_PENDING_CALLS): gRPC's core drops calls
# beyond 1,000 waiting at random, and all beyond 3,000, and its client sees a bare CANCELLED —
# no status, no log line on either side. A burst of a few thousand calls is what an edge gateway
# (or an executor handed thousands of runs) meets: 2,000 streams opened at once on a grpc.aio
# server lost a tenth of them, 5,000 lost 40 % (the bench's 5,000 streams). A waiting call
# costs a few kilobytes.
# How long a call may wait to be taken up before gRPC drops it, as silently. Its default, 30 s,
# is less than a busy executor takes to take up thousands of runs arriving at once (its event
# loop takes them one by one: 753 of the 5,000-stream bench's runs were dropped after waiting
# 30 s). A call's own deadline is what should end its wait; this only bounds one that has none.
MAX_PENDING_CALL_SECONDS = 600

# How long a stopping server waits for its cancelled calls to unwind (they return their database
# connections, end their spans) before the service closes what they use.
UNWIND_SECONDS = 5.0

# grpcio-reflection serves only v1alpha; grpcurl, buf curl and Postman ask for v1 first. The two
# versions' messages are the same on the wire (v1 is v1alpha renamed), so v1 is the same servicer
# under the v1 service name, with v1alpha's (de)serializers.
REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


def _add_reflection_v1(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    servicer = ReflectionServicer(service_names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(REFLECTION_V1, {"ServerReflectionInfo": handler}),)
    )


@dataclass(frozen=True)
class ServiceBinding:
    """A gRPC service to serve: its full name (for health and reflection) and how to add it."""

    name: str
    add_to_server: Callable[[grpc.aio.Server], None]


class GrpcServer:
    """A bound `grpc.aio` server: started by `start`, with its health service, drained by `stop`."""

    def __init__(
        self, server: grpc.aio.Server, port: int, host: str, in_flight: set[asyncio.Task[Any]] | None = None
    ) -> None:
        self.server = server
        self.port = port
        self.host = host
        self._in_flight = in_flight if in_flight is not None else set()
        self._health = health.aio.HealthServicer()
        self._service_names: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, services: Sequence[ServiceBinding]) -> None:
        """Adds the services (with health and reflection), starts serving and reports SERVING."""
        for service in services:
            service.add_to_server(self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self.server)
        self._service_names = tuple(service.name for service in services)
        reflected = [*self._service_names, health.SERVICE_NAME, REFLECTION_V1, reflection.SERVICE_NAME]
        reflection.enable_server_reflection(reflected, self.server)
        _add_reflection_v1(reflected, self.server)
        await self.server.start()
        metrics.observe_event_loop(asyncio.get_running_loop())
        await self.set_serving(True)
        logger.info("serving %s on %s", ", ".join(self._service_names), self.address)

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self._service_names):
            await self._health.set(name, status)

    async def stop(self, grace_seconds: float) -> None:
        """Stops taking new calls and lets in-flight ones finish within the grace period; those
        still running then are cancelled, and waited for (a bounded while) until they unwound."""
        await self._health.enter_graceful_shutdown()
        await self.server.stop(grace_seconds)
        if calls := set(self._in_flight):
            for call in calls:
                call.cancel()  # grpc cancels them too, but does not wait for them
            _, stuck = await asyncio.wait(calls, timeout=UNWIND_SECONDS)
            if stuck:
                logger.warning("%d calls were still unwinding when %s stopped", len(stuck), self.address)

    async def wait_for_termination(self) -> None:
        await self.server.wait_for_termination()


class AddressInUse(OSError):
    """A server could not bind `host:port` (another process listens there, or it is not ours)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"cannot listen on {host}:{port}: the address is in use or not available")
        self.host = host
        self.port = port


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (0 = a free port), not listening yet, with address reuse on
    (so a port left in TIME_WAIT by a previous run is free) as servers bind; AddressInUse when
    the address is taken or not ours."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bound = socket.socket(family, socket.SOCK_STREAM)
    bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        bound.bind((host, port))
    except OSError as error:
        bound.close()
        raise AddressInUse(host, port) from error
    return bound


def check_port_free(host: str, port: int) -> None:
    """Raises AddressInUse when `host:port` cannot be listened on now (port 0 always can): what a
    process that starts several servers checks before it starts any, so that a taken port is
    refused before anything was started and has to be stopped."""
    if port:
        bound_socket(host, port).close()


def bind_server(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_message_bytes: int = 4 * 1024 * 1024,
    max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsFiles = PLAINTEXT,
) -> GrpcServer:
    """A server bound to `host:port` (0 = a free port), not started yet; over TLS (or mutual TLS)
    when `tls` says so. Up to `max_pending_calls` calls may wait for the server to take them up
    (see DEFAULT_MAX_PENDING_CALLS)."""
    counter = message_counter()  # the benchmark's message count; None unless asked for
    calls = ServerInterceptor()
    server = grpc.aio.server(
        interceptors=[calls, *interceptors, *([counter] if counter else [])],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
            # One limit, not gRPC's ramp between a soft and a hard one (random drops above the soft).
            ("grpc.server.max_pending_requests", max_pending_calls),
            ("grpc.server.max_pending_requests_hard_limit", max_pending_calls),
            ("grpc.server_max_unrequested_time_in_server", MAX_PENDING_CALL_SECONDS),
        ],
    )
    try:
        credentials = tls.server_credentials()
        if credentials is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", credentials)
    except RuntimeError as error:  # grpcio's way of saying the address is taken
        raise AddressInUse(host, port) from error
    if bound == 0:
        raise AddressInUse(host, port)
    return GrpcServer(server, bound, host, calls.in_flight)


async def start_server(
    services: Sequence[ServiceBinding],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_message_bytes: int = 4 * 1024 * 1024,
    max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsFiles = PLAINTEXT,
) -> GrpcServer:
    """A server bound and started with `services`."""
    server = bind_server(
        host=host,
        port=port,
        max_message_bytes=max_message_bytes,
        max_pending_calls=max_pending_calls,
        interceptors=interceptors,
        tls=tls,
    )
    await server.start(services)
    return server


def bind_service_server(
    settings: ServiceSettings, *, interceptors: Sequence[grpc.aio.ServerInterceptor] = ()
) -> GrpcServer:
    """A server bound where a service's settings say, with their message and queue limits and TLS."""
    return bind_server(
        host=settings.host,
        port=settings.port,
        max_message_bytes=settings.max_message_bytes,
        max_pending_calls=settings.max_pending_calls,
        interceptors=interceptors,
        tls=settings.tls(),
    )


async def start_service_server(
    settings: ServiceSettings,
    services: Sequence[ServiceBinding],
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> GrpcServer:
    """A server bound by `bind_service_server` and started with `services`."""
    server = bind_service_server(settings, interceptors=interceptors)
    await server.start(services)
    return server


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
