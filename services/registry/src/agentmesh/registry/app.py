"""The registry's composition root: settings → engine → migrations → store → accounts and
registry rules → servicers (public and internal) → server (with the service identity interceptor
guarding the internal service, and the authorization interceptor). The only place that
wires concrete pieces together."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.common.v1 import credential_status_service_pb2_grpc, project_owner_service_pb2_grpc
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc
from agentmesh.registry.agents.registry import AgentRegistry
from agentmesh.registry.agents.watch import AgentWatch
from agentmesh.registry.clock import utc_now
from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.identity.api_keys import ApiKeys
from agentmesh.registry.identity.auth import Accounts, Passwords, RefreshTokenCodec
from agentmesh.registry.identity.invitations import Invitations
from agentmesh.registry.identity.password_policy import PasswordPolicy
from agentmesh.registry.identity.registration import Registration
from agentmesh.registry.identity.sign_in_throttle import LoginThrottle, SignInThrottle
from agentmesh.registry.internal_servicer import (
    CredentialStatusServicer,
    ProjectOwnerServicer,
    RegistryInternalServicer,
)
from agentmesh.registry.mcp_servers.registry import McpServerRegistry
from agentmesh.registry.models import LIMIT_NAMES, ProjectLimits
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.policy import (
    CREDENTIAL_STATUS_POLICY,
    CREDENTIAL_STATUS_SERVICE,
    INTERNAL_POLICY,
    INTERNAL_SERVICE,
    POLICY,
    PROJECT_OWNER_POLICY,
    PROJECT_OWNER_SERVICE,
    SERVICE,
)
from agentmesh.registry.projects.limits import LimitDefaults, ProjectQuotas
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.remote_agents.registry import RemoteAgentRegistry
from agentmesh.registry.runs.bookkeeping import RunBookkeeping
from agentmesh.registry.runs.executors import ExecutorPool
from agentmesh.registry.runs.input_requests import InputRequests
from agentmesh.registry.runs.leases import RunLeases
from agentmesh.registry.runs.turns import SessionTurns
from agentmesh.registry.schedules.claims import ScheduleClaims
from agentmesh.registry.schedules.registry import ScheduleRegistry
from agentmesh.registry.servicer import RegistryServicer
from agentmesh.registry.settings import RegistrySettings
from agentmesh.registry.store.sql import SqlRegistryStore
from agentmesh.registry.usage.ledger import UsageLedger
from agentmesh.registry.v1 import registry_service_pb2_grpc
from agentmesh.registry.webhooks.delivery import DeliveryPolicy, WebhookDispatcher
from agentmesh.registry.webhooks.registry import WebhookRegistry
from agentmesh.registry.webhooks.task_push import TaskPushConfigs
from agentmesh.runtime.client_address import ClientAddressInterceptor
from agentmesh.runtime.database import create_engine, create_sqlite_directory, upgrade
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.egress_http import pinned_transport
from agentmesh.runtime.identity import AuthenticationInterceptor, TokenCodec
from agentmesh.runtime.revocation import RevocationCheck
from agentmesh.runtime.server import ServiceBinding, start_service_server
from agentmesh.runtime.service import RunningService
from agentmesh.runtime.service_identity import ServiceCredentials, ServiceIdentityInterceptor

logger = logging.getLogger(__name__)

SERVICE_NAME = SERVICE.full_name
MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version_registry"


@dataclass
class Components:
    """The registry's wired rules over one database engine."""

    engine: AsyncEngine
    lease_engine: AsyncEngine | None
    tokens: TokenCodec
    accounts: Accounts
    registration: Registration
    invitations: Invitations
    projects: ProjectRegistry
    registry: AgentRegistry
    mcp_servers: McpServerRegistry
    remote_agents: RemoteAgentRegistry
    leases: RunLeases
    api_keys: ApiKeys
    turns: SessionTurns
    runs: RunBookkeeping
    executors: ExecutorPool
    input_requests: InputRequests
    usage: UsageLedger
    webhooks: WebhookRegistry
    task_push: TaskPushConfigs
    dispatcher: WebhookDispatcher
    schedules: ScheduleRegistry
    claims: ScheduleClaims


def _throttle(settings: RegistrySettings, max_failures: int) -> LoginThrottle:
    return LoginThrottle(
        max_failures=max_failures,
        window_seconds=settings.login_failure_window_seconds,
        lockout_seconds=settings.login_lockout_seconds,
        max_lockout_seconds=settings.login_max_lockout_seconds,
    )


async def open_components(settings: RegistrySettings) -> Components:
    """Engine (migrated to head), store and rules, as configured. The caller disposes the engine."""
    secret = settings.jwt_secret.get_secret_value()
    tokens = TokenCodec(secret, access_ttl_seconds=settings.access_token_ttl_seconds)
    await asyncio.to_thread(create_sqlite_directory, settings.database_url)
    engine = create_engine(
        settings.database_url,
        pool_size=settings.database_pool_size,
        pool_timeout_seconds=settings.database_pool_timeout_seconds,
    )
    # Lease renewals and sweeps get a pool of their own (runs/lease_store.py); SQLite needs none.
    lease_engine = (
        None if engine.dialect.name == "sqlite" else create_engine(settings.database_url, pool_size=2)
    )
    try:
        # The store configures the engine's SQLite transactions, so it comes before any connection.
        store = SqlRegistryStore(engine, lease_engine=lease_engine)
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
    except BaseException:
        await _dispose(engine, lease_engine)
        raise
    accounts = Accounts(
        store,
        tokens=tokens,
        passwords=Passwords(
            time_cost=settings.password_hash_time_cost,
            memory_kib=settings.password_hash_memory_kib,
            parallelism=settings.password_hash_parallelism,
        ),
        refresh_tokens=RefreshTokenCodec(secret),
        refresh_ttl_seconds=settings.refresh_token_ttl_seconds,
        throttle=SignInThrottle(
            store,
            per_account=_throttle(settings, settings.login_max_failures),
            per_address=_throttle(settings, settings.login_address_max_failures),
            clock=utc_now,
        ),
        policy=PasswordPolicy(min_length=settings.password_min_length),
    )
    invitations = Invitations(
        store,
        page_tokens=PageTokens(secret),
        clock=utc_now,
        default_ttl_seconds=settings.invitation_ttl_seconds,
    )
    watch = AgentWatch()
    executors = ExecutorPool(store, executor_ttl_seconds=settings.executor_heartbeat_ttl_seconds)
    quotas = ProjectQuotas(limit_defaults(settings), pool_run_slots=executors.run_slots, ledger=store.usage)
    projects = ProjectRegistry(
        store, page_tokens=PageTokens(secret), watch=watch, quotas=quotas, clock=utc_now
    )
    registry = AgentRegistry(store, page_tokens=PageTokens(secret), executors=executors, watch=watch)
    runs = RunBookkeeping(store, quotas=quotas, watch=watch)
    # The executors' egress policy, so a URL they would refuse is refused when it is registered.
    egress = EgressPolicy(settings.egress_allow, mesh_endpoints=[f"{settings.host}:{settings.port}"])
    mcp_servers = McpServerRegistry(
        store, page_tokens=PageTokens(secret), clock=utc_now, watch=watch, egress=egress
    )
    leases = RunLeases(
        store.leases,
        lease_seconds=settings.run_lease_seconds,
        startup_grace_seconds=settings.run_lease_startup_grace_seconds,
        clock=utc_now,
        runs_ready=watch.runs_ready,
    )
    api_keys = ApiKeys(store, projects=projects, page_tokens=PageTokens(secret), clock=utc_now)
    # Webhook endpoints are tenants' URLs: off the private network and the registry's own port.
    egress = EgressPolicy(settings.egress_allow, mesh_endpoints=[f"{settings.host}:{settings.port}"])
    return Components(
        engine=engine,
        lease_engine=lease_engine,
        api_keys=api_keys,
        tokens=tokens,
        accounts=accounts,
        registration=Registration(
            store, accounts=accounts, invitations=invitations, mode=settings.registration_mode, clock=utc_now
        ),
        invitations=invitations,
        projects=projects,
        registry=registry,
        mcp_servers=mcp_servers,
        leases=leases,
        remote_agents=RemoteAgentRegistry(
            store, page_tokens=PageTokens(secret), clock=utc_now, egress=egress
        ),
        turns=SessionTurns(runs, store.leases, store.input_requests),
        runs=runs,
        executors=executors,
        input_requests=InputRequests(store, page_tokens=PageTokens(secret), clock=utc_now, watch=watch),
        usage=UsageLedger(store),
        webhooks=WebhookRegistry(store, page_tokens=PageTokens(secret), clock=utc_now, egress=egress),
        task_push=TaskPushConfigs(store, clock=utc_now, egress=egress),
        dispatcher=WebhookDispatcher(
            store.webhook_outbox,
            client=httpx.AsyncClient(transport=pinned_transport(egress, httpx)),
            policy=webhook_policy(settings),
            clock=utc_now,
        ),
        schedules=ScheduleRegistry(store, page_tokens=PageTokens(secret), clock=utc_now),
        claims=ScheduleClaims(
            store, clock=utc_now, missed_grace_seconds=settings.schedule_missed_grace_seconds
        ),
    )


@dataclass(kw_only=True)
class RegistryService(RunningService):
    """The running registry. Stopping ends the agent watches first (their executors reconnect),
    so they do not hold the server's drain for its whole grace."""

    watch: AgentWatch
    settings: RegistrySettings  # what it runs with (a replica or a restart takes the same)
    # For the process that embeds the registry (`agentmesh up` makes its first user through it).
    accounts: Accounts

    async def stop(self, grace_seconds: float = 5.0) -> None:
        self.watch.close()
        await super().stop(grace_seconds)


async def start(settings: RegistrySettings) -> RunningService:
    components = await open_components(settings)
    try:
        if settings.superuser_email:
            await _bootstrap_superuser(components.accounts, settings)
        servicer = RegistryServicer(
            accounts=components.accounts,
            registration=components.registration,
            invitations=components.invitations,
            api_keys=components.api_keys,
            projects=components.projects,
            registry=components.registry,
            mcp_servers=components.mcp_servers,
            remote_agents=components.remote_agents,
            input_requests=components.input_requests,
            usage=components.usage,
            webhooks=components.webhooks,
            schedules=components.schedules,
        )
        internal = RegistryInternalServicer(
            components.registry,
            components.mcp_servers,
            components.leases,
            turns=components.turns,
            accounts=components.accounts,
            api_keys=components.api_keys,
            remote_agents=components.remote_agents,
            runs=components.runs,
            executors=components.executors,
            input_requests=components.input_requests,
            claims=components.claims,
            task_push=components.task_push,
        )
        credential_status = CredentialStatusServicer(components.api_keys)
        project_owners = ProjectOwnerServicer(components.projects)
        credentials = ServiceCredentials(settings.jwt_secret.get_secret_value(), service="registry")
        # The registry's own answer, read from its store: a revoked token is refused on its port
        # within a second, as at the gateway's.
        revocation = RevocationCheck(components.api_keys.credential_status)
        server = await start_service_server(
            settings,
            [
                ServiceBinding(
                    SERVICE_NAME,
                    lambda s: registry_service_pb2_grpc.add_RegistryServiceServicer_to_server(servicer, s),
                ),
                ServiceBinding(
                    CREDENTIAL_STATUS_SERVICE.full_name,
                    lambda s: (
                        credential_status_service_pb2_grpc.add_CredentialStatusServiceServicer_to_server(
                            credential_status, s
                        )
                    ),
                ),
                ServiceBinding(
                    PROJECT_OWNER_SERVICE.full_name,
                    lambda s: project_owner_service_pb2_grpc.add_ProjectOwnerServiceServicer_to_server(
                        project_owners, s
                    ),
                ),
                ServiceBinding(
                    INTERNAL_SERVICE.full_name,
                    lambda s: (
                        registry_internal_service_pb2_grpc.add_RegistryInternalServiceServicer_to_server(
                            internal, s
                        )
                    ),
                ),
            ],
            interceptors=[
                ServiceIdentityInterceptor(
                    credentials, [INTERNAL_SERVICE, CREDENTIAL_STATUS_SERVICE, PROJECT_OWNER_SERVICE]
                ),
                ClientAddressInterceptor(credentials, [SERVICE_NAME]),
                AuthenticationInterceptor(components.tokens, SERVICE, POLICY, revocation=revocation),
                AuthenticationInterceptor(
                    components.tokens, INTERNAL_SERVICE, INTERNAL_POLICY, revocation=revocation
                ),
                AuthenticationInterceptor(
                    components.tokens, CREDENTIAL_STATUS_SERVICE, CREDENTIAL_STATUS_POLICY
                ),
                AuthenticationInterceptor(components.tokens, PROJECT_OWNER_SERVICE, PROJECT_OWNER_POLICY),
            ],
        )
    except BaseException:
        await _dispose(components.engine, components.lease_engine)
        raise
    components.leases.start_sweeper(settings.run_lease_sweep_seconds)
    components.dispatcher.start()
    return RegistryService(
        name="registry",
        server=server,
        closers=[
            lambda: _dispose(components.engine, components.lease_engine),
            components.leases.stop,
            components.dispatcher.stop,
        ],
        watch=components.registry.watch,
        settings=settings,
        accounts=components.accounts,
    )


async def _bootstrap_superuser(accounts: Accounts, settings: RegistrySettings) -> None:
    try:
        await accounts.ensure_superuser(
            email=settings.superuser_email, password=settings.superuser_password.get_secret_value()
        )
    except ValidationFailed as error:
        problems = "; ".join(f"{v.field} {v.description}" for v in error.violations)
        raise ValueError(
            f"AGENTMESH_SUPERUSER_EMAIL / AGENTMESH_SUPERUSER_PASSWORD are not usable: {problems}"
        ) from None


async def _dispose(*engines: AsyncEngine | None) -> None:
    for engine in engines:
        if engine is not None:
            await engine.dispose()


def limit_defaults(settings: RegistrySettings) -> LimitDefaults:
    """The operator's project limits, from the `default_<limit>` settings."""
    limits = ProjectLimits(**{name: getattr(settings, f"default_{name}") for name in LIMIT_NAMES})
    return LimitDefaults(limits, project_share_of_pool=settings.project_share_of_pool)


def webhook_policy(settings: RegistrySettings) -> DeliveryPolicy:
    return DeliveryPolicy(
        max_attempts=settings.webhook_max_attempts,
        backoff_seconds=settings.webhook_backoff_seconds,
        max_backoff_seconds=settings.webhook_max_backoff_seconds,
        timeout_seconds=settings.webhook_timeout_seconds,
        poll_seconds=settings.webhook_poll_seconds,
    )
