"""The gateway's composition root: settings → peer channels → executor pool → chat rules →
gRPC servicer and HTTP app → servers."""

from __future__ import annotations

import asyncio
import contextlib

from agentmesh.executor.client import ExecutorPool
from agentmesh.gateway.gateway import ChatGateway
from agentmesh.gateway.http.app import HttpServer, create_http_app
from agentmesh.gateway.servicer import GatewayServicer
from agentmesh.gateway.settings import GatewaySettings
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.server import ServiceBinding, start_server
from agentmesh.runtime.service import RunningService

SERVICE_NAME = gateway_service_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name


class GatewayService(RunningService):
    """The gateway: its gRPC server plus its HTTP server."""

    http: HttpServer


async def start(settings: GatewaySettings) -> GatewayService:
    tokens = TokenCodec(settings.jwt_secret.get_secret_value())
    registry_channel = create_channel(settings.registry_address, max_message_bytes=settings.max_message_bytes)
    memory_channel = create_channel(settings.memory_address, max_message_bytes=settings.max_message_bytes)
    executors = ExecutorPool(settings.executor_addresses, max_message_bytes=settings.max_message_bytes)
    gateway = ChatGateway(
        executors=executors,
        max_message_bytes=settings.max_chat_message_bytes,
        timeout_seconds=settings.chat_timeout_seconds,
    )
    servicer = GatewayServicer(gateway, tokens)
    server = await start_server(
        [
            ServiceBinding(
                SERVICE_NAME,
                lambda s: gateway_service_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, s),
            )
        ],
        host=settings.host,
        port=settings.port,
        max_message_bytes=settings.max_message_bytes,
    )
    http = HttpServer(
        create_http_app(dependencies=[("registry", registry_channel), ("memory", memory_channel)]),
        host=settings.http_host,
        port=settings.http_port,
    )
    await http.start()
    health_task = asyncio.create_task(_watch_executors(executors, settings.executor_health_interval_seconds))

    async def stop_health() -> None:
        health_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await health_task

    service = GatewayService(
        "gateway",
        server,
        closers=[registry_channel.close, memory_channel.close, executors.close, http.stop, stop_health],
    )
    service.http = http
    return service


async def _watch_executors(executors: ExecutorPool, interval_seconds: float) -> None:
    while True:
        await executors.check_health()
        await asyncio.sleep(interval_seconds)
