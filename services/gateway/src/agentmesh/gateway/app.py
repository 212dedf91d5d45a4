"""The gateway's composition root: settings → peer channels → run router → access guard → the
gateway's core → its faces (gRPC servicer, forwarders, HTTP app) → servers, then the router's
background work. Everything is constructed before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.server.request_handlers import GrpcHandler
from a2a.types import a2a_pb2_grpc

from agentmesh.executor.client import RunRouter, SystemToken
from agentmesh.gateway.a2a.card import A2AEndpoints
from agentmesh.gateway.a2a.handler import MeshRequestHandler
from agentmesh.gateway.a2a.published import PublishedAgents
from agentmesh.gateway.a2a.push import TaskPushConfigs
from agentmesh.gateway.a2a.tasks import A2ATasks, LiveRuns
from agentmesh.gateway.access import AccessGuard, AuthorizationInterceptor
from agentmesh.gateway.client_address import ClientAddresses
from agentmesh.gateway.credentials import CredentialVerifier
from agentmesh.gateway.forwarding import forwarding_handler
from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.http.a2a_face import A2AFace
from agentmesh.gateway.http.app import HttpServer, create_http_app
from agentmesh.gateway.http.context import HttpContext
from agentmesh.gateway.policy import A2A_SERVICE, RPC_POLICY
from agentmesh.gateway.project_limits import OpenStreams, ProjectLimitsCache
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.gateway.schedules import ScheduleFirer
from agentmesh.gateway.servicer import GatewayServicer, RegistryOverrides
from agentmesh.gateway.settings import GatewaySettings
from agentmesh.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2
from agentmesh.runtime.channels import PeerSecurity, create_channel
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.revocation import RevocationCheck, registry_credential_status
from agentmesh.runtime.server import ServiceBinding, start_service_server
from agentmesh.runtime.service import RunningService
from agentmesh.runtime.service_identity import ServiceCredentials

GATEWAY_SERVICE = gateway_service_pb2.DESCRIPTOR.services_by_name["GatewayService"]
REGISTRY_SERVICE = registry_service_pb2.DESCRIPTOR.services_by_name["RegistryService"]
MEMORY_SERVICE = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"]
SERVICE_NAME = GATEWAY_SERVICE.full_name


@dataclass
class GatewayService(RunningService):
    """The gateway: its gRPC server plus its HTTP server, and the router its chats go through."""

    http: HttpServer = field(kw_only=True)
    router: RunRouter = field(kw_only=True)
    schedules: ScheduleFirer = field(kw_only=True)


def _check_policy() -> None:
    served = [
        f"/{service.full_name}/{method.name}"
        for service in (GATEWAY_SERVICE, REGISTRY_SERVICE, MEMORY_SERVICE, A2A_SERVICE)
        for method in service.methods
    ]
    missing = [method for method in served if method not in RPC_POLICY]
    if missing:
        raise RuntimeError(f"RPCs without an access policy: {missing}")


async def start(settings: GatewaySettings) -> GatewayService:
    _check_policy()
    tokens = TokenCodec(settings.jwt_secret.get_secret_value())
    tls = settings.tls()
    # What the gateway's calls to the mesh's services carry: its service credential, over TLS when
    # configured. Its own ports are public: clients authenticate with their tokens.
    peers = PeerSecurity(ServiceCredentials(settings.jwt_secret.get_secret_value(), service="gateway"), tls)
    registry_channel = create_channel(
        settings.registry_address, max_message_bytes=settings.max_message_bytes, security=peers
    )
    memory_channel = create_channel(
        settings.memory_address, max_message_bytes=settings.max_message_bytes, security=peers
    )
    registry = RegistryClient(registry_channel)
    memory = MemoryClient(memory_channel)
    system_token = SystemToken(tokens)
    router = RunRouter.for_pool(registry, system_token, settings, security=peers)
    credentials = CredentialVerifier(
        tokens=tokens,
        registry=registry,
        system_metadata=system_token.metadata,
        failed_keys=RateLimiter(
            rate_per_second=settings.failed_api_key_rate_per_second, burst=settings.failed_api_key_burst
        ),
        revocation=RevocationCheck(
            registry_credential_status(registry_channel, system_metadata=system_token.metadata),
            interval_seconds=settings.credential_check_interval_seconds,
        ),
        check_interval_seconds=settings.credential_check_interval_seconds,
    )
    guard = AccessGuard(
        credentials=credentials,
        registry=registry,
        memory=memory,
        limiter=RateLimiter(rate_per_second=settings.rate_limit_per_second, burst=settings.rate_limit_burst),
        grant_ttl_seconds=settings.access_grant_ttl_seconds,
        client_addresses=ClientAddresses(settings.trusted_proxies),
        sign_ups=RateLimiter(
            rate_per_second=settings.registration_max_per_address / settings.registration_window_seconds,
            burst=max(1, settings.registration_max_per_address),
        ),
        project_limits=ProjectLimitsCache(
            registry=registry,
            system_metadata=system_token.metadata,
            ttl_seconds=settings.project_limits_ttl_seconds,
        ),
        streams=OpenStreams(max_per_user=settings.max_open_streams_per_user),
    )
    gateway = AgentGateway(
        router=router,
        registry=registry,
        memory=memory,
        max_message_bytes=settings.max_chat_message_bytes,
        timeout_seconds=settings.chat_timeout_seconds,
    )
    servicer = GatewayServicer(gateway)
    schedules = ScheduleFirer(
        gateway=gateway,
        registry=registry,
        tokens=tokens,
        system_metadata=system_token.metadata,
        poll_seconds=settings.schedule_poll_seconds,
        run_token_ttl_seconds=int(settings.chat_timeout_seconds) + 300,
    )
    # A2A: one request handler over the task core, behind the HTTP bindings and gRPC's.
    live_runs = LiveRuns()
    a2a_tasks = A2ATasks(
        gateway=gateway,
        registry=registry,
        memory=memory,
        router=router,
        live=live_runs,
        cancel_wait_seconds=settings.a2a_cancel_wait_seconds,
    )
    endpoints = A2AEndpoints(http_base_url=settings.public_url, grpc_address=settings.public_grpc_address)
    a2a_handler = MeshRequestHandler(
        a2a_tasks, endpoints, push=TaskPushConfigs(a2a_tasks, registry), streams=guard.streams
    )
    # Terminating an agent over gRPC stops its runs in flight too, as over REST.
    overrides = RegistryOverrides(gateway)
    context = HttpContext(
        guard=guard,
        registry=registry,
        memory=memory,
        gateway=gateway,
        max_chat_messages=settings.max_chat_messages,
        public_url=settings.public_url,
        dependencies=(("registry", registry_channel), ("memory", memory_channel)),
        a2a=A2AFace(a2a_tasks, a2a_handler, endpoints, PublishedAgents(registry, system_token.metadata)),
    )
    http = HttpServer(
        create_http_app(context, max_request_body_bytes=settings.max_request_body_bytes),
        host=settings.http_host,
        port=settings.http_port,
        shutdown_grace_seconds=settings.http_shutdown_grace_seconds,
        tls=tls,
    )
    # Constructed; from here on things run.
    server = await start_service_server(
        settings,
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
                            REGISTRY_SERVICE,
                            registry_channel,
                            overrides={
                                "DeleteAgent": overrides.DeleteAgent,
                                "DeleteProject": overrides.DeleteProject,
                            },
                        ),
                    )
                ),
            ),
            ServiceBinding(
                A2A_SERVICE.full_name,
                lambda s: a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(a2a_handler), s),
            ),
            ServiceBinding(
                MEMORY_SERVICE.full_name,
                lambda s: s.add_generic_rpc_handlers((forwarding_handler(MEMORY_SERVICE, memory_channel),)),
            ),
        ],
        interceptors=[AuthorizationInterceptor(guard)],
    )
    # Closed in reverse: the firer stops (its runs' outcomes recorded) before the channels close.
    closers = [registry_channel.close, memory_channel.close, router.stop, live_runs.stop, schedules.stop]
    endpoints.grpc_address = endpoints.grpc_address or server.address
    try:
        await router.start()
        await http.start()
        endpoints.http_base_url = endpoints.http_base_url or http.url
        schedules.start()
    except BaseException:
        await server.stop(0)
        for close in closers:
            await close()
        raise
    return GatewayService(
        "gateway", server, closers=[*closers, http.stop], http=http, router=router, schedules=schedules
    )
