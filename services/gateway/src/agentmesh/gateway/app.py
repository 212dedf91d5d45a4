"""The gateway's composition root: settings → peer channels → executor pool and membership →
access guard → chat rules → gRPC servicer, forwarders and HTTP app → servers."""

from __future__ import annotations

from agentmesh.executor.client import ExecutorPool
from agentmesh.gateway.access import AccessGuard, AuthorizationInterceptor, current_caller
from agentmesh.gateway.forwarding import forwarding_handler
from agentmesh.gateway.gateway import ChatGateway
from agentmesh.gateway.http.app import HttpServer, create_http_app
from agentmesh.gateway.http.context import HttpContext
from agentmesh.gateway.policy import RPC_POLICY
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.gateway.routing import ExecutorMembership
from agentmesh.gateway.servicer import GatewayServicer
from agentmesh.gateway.settings import GatewaySettings
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.server import ServiceBinding, start_server
from agentmesh.runtime.service import RunningService

GATEWAY_SERVICE = gateway_service_pb2.DESCRIPTOR.services_by_name["GatewayService"]
REGISTRY_SERVICE = registry_service_pb2.DESCRIPTOR.services_by_name["RegistryService"]
MEMORY_SERVICE = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"]
SERVICE_NAME = GATEWAY_SERVICE.full_name


class GatewayService(RunningService):
    """The gateway: its gRPC server plus its HTTP server."""

    http: HttpServer
    executors: ExecutorPool
    membership: ExecutorMembership


def _check_policy() -> None:
    served = [
        f"/{service.full_name}/{method.name}"
        for service in (GATEWAY_SERVICE, REGISTRY_SERVICE, MEMORY_SERVICE)
        for method in service.methods
    ]
    missing = [method for method in served if method not in RPC_POLICY]
    if missing:
        raise RuntimeError(f"RPCs without an access policy: {missing}")


async def start(settings: GatewaySettings) -> GatewayService:
    _check_policy()
    tokens = TokenCodec(settings.jwt_secret.get_secret_value())
    registry_channel = create_channel(settings.registry_address, max_message_bytes=settings.max_message_bytes)
    memory_channel = create_channel(settings.memory_address, max_message_bytes=settings.max_message_bytes)
    registry = RegistryClient(registry_channel)
    memory = MemoryClient(memory_channel)
    executors = ExecutorPool(settings.executor_addresses, max_message_bytes=settings.max_message_bytes)
    membership = ExecutorMembership(
        executors,
        registry,
        tokens,
        refresh_interval_seconds=settings.executor_refresh_interval_seconds,
        health_interval_seconds=settings.executor_health_interval_seconds,
        discovery=settings.executor_discovery,
    )
    guard = AccessGuard(
        tokens=tokens,
        registry=registry,
        memory=memory,
        limiter=RateLimiter(rate_per_second=settings.rate_limit_per_second, burst=settings.rate_limit_burst),
        grant_ttl_seconds=settings.access_grant_ttl_seconds,
    )
    chat = ChatGateway(
        executors=executors,
        max_message_bytes=settings.max_chat_message_bytes,
        timeout_seconds=settings.chat_timeout_seconds,
    )
    servicer = GatewayServicer(chat)

    async def stop_terminated_agent(
        request: registry_service_pb2.DeleteAgentRequest, _response: object
    ) -> None:
        # Terminated first, so no new run can start; then the runs in flight stop.
        await chat.cancel_agent_runs(
            current_caller(), request.project_id, request.id, reason="agent terminated"
        )

    server = await start_server(
        [
            ServiceBinding(
                SERVICE_NAME,
                lambda s: gateway_service_pb2_grpc.add_GatewayServiceServicer_to_server(servicer, s),
            ),
            ServiceBinding(
                REGISTRY_SERVICE.full_name,
                lambda s: s.add_generic_rpc_handlers(
                    (
                        forwarding_handler(
                            REGISTRY_SERVICE, registry_channel, after={"DeleteAgent": stop_terminated_agent}
                        ),
                    )
                ),
            ),
            ServiceBinding(
                MEMORY_SERVICE.full_name,
                lambda s: s.add_generic_rpc_handlers((forwarding_handler(MEMORY_SERVICE, memory_channel),)),
            ),
        ],
        host=settings.host,
        port=settings.port,
        max_message_bytes=settings.max_message_bytes,
        interceptors=[AuthorizationInterceptor(guard)],
    )
    context = HttpContext(
        guard=guard,
        registry=registry,
        memory=memory,
        chat=chat,
        max_chat_messages=settings.max_chat_messages,
        public_url=settings.public_url,
        dependencies=(("registry", registry_channel), ("memory", memory_channel)),
    )
    http = HttpServer(
        create_http_app(context, max_request_body_bytes=settings.max_request_body_bytes),
        host=settings.http_host,
        port=settings.http_port,
        shutdown_grace_seconds=settings.http_shutdown_grace_seconds,
    )
    closers = [registry_channel.close, memory_channel.close, executors.close]
    try:
        await membership.start()
        await http.start()
    except BaseException:
        await server.stop(0)
        await membership.stop()
        for close in closers:
            await close()
        raise
    service = GatewayService("gateway", server, closers=[*closers, membership.stop, http.stop])
    service.http = http
    service.executors = executors
    service.membership = membership
    return service
