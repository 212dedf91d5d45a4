"""The executor's composition root: settings → peer channels → models, tools, cache, run
router → runner → servicer → server, then pool membership in the registry."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentmesh.executor.agents.cache import AgentCache
from agentmesh.executor.agents.runtime import AgentBuilder, AgentRuntime
from agentmesh.executor.agents.specs import AgentSpecs
from agentmesh.executor.agents.watch import AgentWatcher
from agentmesh.executor.client import RunRouter, SystemToken
from agentmesh.executor.delegation.a2a import RemoteA2AAgents, RemoteEgress
from agentmesh.executor.delegation.delegator import Delegator
from agentmesh.executor.delegation.executor_runs import ExecutorRuns
from agentmesh.executor.durability.finisher import RunFinisher
from agentmesh.executor.durability.handover import Handover
from agentmesh.executor.durability.leases import LeaseKeeper, OrphanCloser
from agentmesh.executor.durability.outbox import EventOutbox
from agentmesh.executor.durability.resumption import RunResumer
from agentmesh.executor.loops.llm import LlmLoopSettings
from agentmesh.executor.loops.workflow import WorkflowSettings
from agentmesh.executor.providers.factory import ModelFactory
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.executor.run.admission import RunAdmission
from agentmesh.executor.run.outliving import Outliving
from agentmesh.executor.run.run import RunServices
from agentmesh.executor.run.runner import RunExecutor
from agentmesh.executor.servicer import ExecutorServicer
from agentmesh.executor.settings import ExecutorSettings, process_environment
from agentmesh.executor.tools.mcp import preload_sdk
from agentmesh.executor.tools.mcp_resolution import McpServerResolver
from agentmesh.internal.executor.v1 import executor_service_pb2, executor_service_pb2_grpc
from agentmesh.memory.client import MemoryClient
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime import metrics
from agentmesh.runtime.background import BackgroundTask
from agentmesh.runtime.channels import PeerSecurity, create_channel
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import AuthenticationInterceptor, TokenCodec
from agentmesh.runtime.revocation import RevocationCheck, registry_credential_status
from agentmesh.runtime.server import ServiceBinding, bind_service_server
from agentmesh.runtime.service import RunningService
from agentmesh.runtime.service_identity import ServiceCredentials, ServiceIdentityInterceptor

logger = logging.getLogger(__name__)

# Past the drain grace: how long handing runs over (stopping them, releasing their leases) may
# take before the server cancels what is left.
_HANDOVER_SECONDS = 5.0

EXECUTOR_SERVICE = executor_service_pb2.DESCRIPTOR.services_by_name["ExecutorService"]
SERVICE_NAME = EXECUTOR_SERVICE.full_name


@dataclass(kw_only=True)
class ExecutorService(RunningService):
    """The executor: its gRPC server, its runner and its agent cache."""

    runner: RunExecutor
    cache: AgentCache[AgentRuntime]
    executor_id: str
    advertise_address: str
    leases: LeaseKeeper | None = None
    watcher: AgentWatcher | None = None

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Drains: no new calls (health NOT_SERVING) and no orphans taken over;
        the runs in flight get `grace_seconds` to end; those still going then are handed over —
        stopped without an end, their leases released at once — and another executor resumes
        them from the log. Their callers' streams end UNAVAILABLE, which the gateway follows
        into the log. Then the resources close."""
        if self.leases is not None:
            self.leases.stop_taking_over()
        stopping = asyncio.create_task(self.server.stop(grace_seconds + _HANDOVER_SECONDS))
        if not await self.runner.wait_idle(grace_seconds) and self.leases is not None:
            runs = await self.runner.hand_over()
            try:
                await self.leases.release(runs)
            except Exception:  # their leases then expire, and they are taken over a lease time later
                logger.exception("could not release the leases of %d runs handed over", len(runs))
            logger.info("handed %d runs over to the other executors", len(runs))
        await stopping
        await self.close()


async def start(settings: ExecutorSettings) -> ExecutorService:
    """Binds the server first (the advertised address holds its port, and delegation needs it),
    builds everything in dependency order, then starts serving and joins the registry's pool."""
    secret = settings.jwt_secret.get_secret_value()
    if not secret:
        # Without it the executor could neither prove it is a mesh service nor check its callers.
        raise ValueError("the executor needs the mesh's JWT secret: set AGENTMESH_JWT_SECRET")
    tokens = TokenCodec(secret)
    credentials = ServiceCredentials(secret, service="executor")
    tls = settings.tls()
    peers = PeerSecurity(credentials, tls)
    registry_channel = create_channel(
        settings.registry_address, max_message_bytes=settings.max_message_bytes, security=peers
    )
    # A caller's token is refused here, as at the gateway, once the registry says it was revoked.
    revocation = RevocationCheck(
        registry_credential_status(registry_channel, system_metadata=SystemToken(tokens).metadata)
    )
    server = bind_service_server(
        settings,
        interceptors=[
            ServiceIdentityInterceptor(credentials, [EXECUTOR_SERVICE]),
            AuthenticationInterceptor(tokens, EXECUTOR_SERVICE, revocation=revocation),
        ],
    )
    advertise_address = settings.advertise_address or _advertise(settings.host, server.port)
    executor_id = settings.executor_id or f"{socket.gethostname()}-{random.getrandbits(32):08x}"

    memory_channel = create_channel(
        settings.memory_address, max_message_bytes=settings.max_message_bytes, security=peers
    )
    registry = RegistryClient(registry_channel)
    memory = MemoryClient(memory_channel)
    secrets = Secrets()
    models = ModelFactory(settings, secrets=secrets)
    cache: AgentCache[AgentRuntime] = AgentCache(
        max_entries=settings.cache_max_entries, idle_ttl_seconds=settings.cache_idle_ttl_seconds
    )
    router = RunRouter.for_pool(registry, SystemToken(tokens), settings, security=peers)
    system_metadata = router.system_metadata
    finisher = RunFinisher(
        registry,
        system_metadata=system_metadata,
        window_seconds=settings.finish_batch_window_seconds,
        max_batch=settings.finish_batch_max_runs,
        timeout_seconds=settings.cleanup_timeout_seconds,
        # Late-bound: the outbox is built after the finisher, which it tells of each delivery.
        held_back=lambda: outbox.pending_run_ids(),
    )
    outbox = EventOutbox(
        memory, system_metadata=system_metadata, delivered=finisher.wake, superseded=finisher.forget
    )
    # What tenants point the executor at keeps off the private network and the mesh's own ports.
    egress = EgressPolicy(
        settings.egress_allow,
        mesh_endpoints=[
            advertise_address,
            f"{settings.host}:{server.port}",
            settings.registry_address,
            settings.memory_address,
            *settings.executor_addresses,
        ],
    )
    allowed = ", ".join(settings.egress_allow) or "nothing else"
    logger.info("tenants' URLs may lead to public addresses and to: %s", allowed)
    builder = AgentBuilder(
        models,
        egress=egress,
        mcp_servers=McpServerResolver(
            registry,
            system_metadata=system_metadata,
            environment=process_environment(),
            secrets=secrets,
        ),
    )
    specs = AgentSpecs(registry, capacity=settings.agent_spec_cache_size)
    watcher = AgentWatcher(registry, specs, executor_id=executor_id, system_metadata=system_metadata)
    executor_runs = ExecutorRuns(
        router,
        a2a=RemoteA2AAgents(
            registry,
            system_metadata=system_metadata,
            cleanup_timeout_seconds=settings.cleanup_timeout_seconds,
            egress=RemoteEgress(
                egress,
                card_timeout_seconds=settings.remote_card_timeout_seconds,
                card_max_bytes=settings.remote_card_max_bytes,
            ),
        ),
        placement_seconds=settings.placement_wait_seconds,
    )
    handover = Handover()
    services = RunServices(
        registry=registry,
        memory=memory,
        executor_runs=executor_runs,
        delegator=Delegator(
            executor_runs,
            max_depth=settings.max_delegation_depth,
            max_per_step=settings.max_delegations_per_step,
            max_per_chat=settings.max_delegations_per_chat,
            timeout_seconds=settings.delegation_timeout_seconds,
            cleanup_timeout_seconds=settings.cleanup_timeout_seconds,
            memory=memory,
            handing_over=handover.is_started,
        ),
        outliving=Outliving(memory, system_metadata=system_metadata),
        llm_settings=LlmLoopSettings(
            default_max_steps=settings.default_max_steps,
            text_chunk_chars=settings.text_chunk_chars,
            text_flush_seconds=settings.text_flush_seconds,
            tool_timeout_seconds=settings.tool_timeout_seconds,
            cleanup_timeout_seconds=settings.cleanup_timeout_seconds,
            tool_result_prompt_chars=settings.tool_result_prompt_chars,
        ),
        workflow_settings=WorkflowSettings(
            loop_safety_max_iterations=settings.loop_safety_max_iterations,
            max_delegation_depth=settings.max_delegation_depth,
            delegation_timeout_seconds=settings.delegation_timeout_seconds,
        ),
        finisher=finisher,
        executor_id=executor_id,
        cleanup_timeout_seconds=settings.cleanup_timeout_seconds,
        history_window_events=settings.history_window_events,
        context_budget_tokens=settings.context_budget_tokens,
    )
    runner = RunExecutor(
        settings=settings,
        services=services,
        admission=RunAdmission(
            services=services,
            specs=specs,
            max_delegation_depth=settings.max_delegation_depth,
            outbox=outbox,
            secrets=secrets,
            max_concurrent_starts=settings.max_concurrent_starts,
        ),
        builder=builder,
        cache=cache,
        handover=handover,
        outbox=outbox,
    )
    servicer = ExecutorServicer(runner, cache)
    leases = LeaseKeeper(
        registry,
        RunResumer(
            memory,
            registry,
            OrphanCloser(memory, system_metadata=system_metadata),
            resume=runner.resume,
            system_metadata=system_metadata,
            max_resumes=settings.resume_max_times,
            executor_id=executor_id,
        ),
        executor_id=executor_id,
        held=lambda: [*runner.leased_runs(), *finisher.pending_runs(), *outbox.pending_runs()],
        lose=runner.lose,
        interrupt=runner.interrupt,
        system_metadata=system_metadata,
        interval_seconds=settings.lease_renew_interval_seconds,
        max_orphans=settings.lease_max_orphans,
        # Cut off from the registry: NOT_SERVING, so that runs go to other executors first
        # (ignored once draining: the server's health then stays NOT_SERVING).
        on_cut_off=lambda cut_off: server.set_serving(not cut_off),
    )
    # A person answered a suspended run (the registry pushes it on the agent watch): the next
    # renewal, at once, takes the run over.
    watcher.on_runs_ready = leases.wake
    heartbeat = _Heartbeat(
        registry,
        executor_id=executor_id,
        address=advertise_address,
        tools=builder.tool_names,
        model_providers=models.providers,
        run_slots=settings.max_concurrent_runs,
        interval_seconds=settings.heartbeat_interval_seconds,
        system_metadata=system_metadata,
    )

    await server.start(
        [
            ServiceBinding(
                SERVICE_NAME,
                lambda s: executor_service_pb2_grpc.add_ExecutorServiceServicer_to_server(servicer, s),
            )
        ]
    )
    # With no other executor known, delegations go to this one, still over gRPC.
    await router.start(fallback_address=advertise_address)
    cache.start_sweeper(settings.cache_sweep_seconds)
    mcp_sdk = preload_sdk()
    finisher.start()
    outbox.start()
    heartbeat.start()
    leases.start()
    if settings.agent_watch:
        watcher.start()
    unobserve_cache = metrics.observe_agent_cache(cache.stats)
    unobserve_runs = metrics.observe_active_runs(lambda: runner.active_runs)

    async def stop_observing() -> None:
        unobserve_cache()
        unobserve_runs()

    logger.info("executor %s advertises %s", executor_id, advertise_address)
    return ExecutorService(
        name="executor",
        server=server,
        closers=[
            stop_observing,
            lambda: asyncio.wait([mcp_sdk]),
            registry_channel.close,
            memory_channel.close,
            router.stop,
            models.aclose,
            cache.aclose,
            heartbeat.stop,
            watcher.stop,
            leases.stop,
            finisher.stop,
            lambda: outbox.stop(settings.cleanup_timeout_seconds),
            lambda: runner.drain(settings.cleanup_timeout_seconds),
        ],
        runner=runner,
        cache=cache,
        executor_id=executor_id,
        advertise_address=advertise_address,
        leases=leases,
        watcher=watcher,
    )


def _advertise(host: str, port: int) -> str:
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"{host}:{port}"


class _Heartbeat:
    """Keeps this executor in the registry's pool (when it can sign a system token), in a
    background task from `start` to `stop`."""

    def __init__(
        self,
        registry: RegistryClient,
        *,
        executor_id: str,
        address: str,
        tools: Sequence[str],
        model_providers: Callable[[], Sequence[tuple[str, str]]],
        run_slots: int,
        interval_seconds: float,
        system_metadata: Callable[[], Metadata | None],
    ) -> None:
        self._registry = registry
        self._executor_id = executor_id
        self._address = address
        # What it offers agents, reported with every beat (a key file may appear or go).
        self._tools = list(tools)
        self._model_providers = model_providers
        self._run_slots = run_slots
        self._interval_seconds = interval_seconds
        self._system_metadata = system_metadata
        self._task = BackgroundTask("executor heartbeat", self._beat)

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _beat(self) -> None:
        while True:
            metadata = self._system_metadata()
            if metadata is None:
                return
            try:
                await self._registry.register_executor(
                    self._executor_id,
                    self._address,
                    tools=self._tools,
                    model_providers=self._model_providers(),
                    run_slots=self._run_slots,
                    metadata=metadata,
                )
            except DomainError as error:
                logger.warning(
                    "could not register executor %s with the registry: %s", self._executor_id, error
                )
            await asyncio.sleep(self._interval_seconds)
