"""The memory service's composition root: settings → engine → migrations → store → rules →
servicers → server, plus the retention sweeper running beside it. Only the mesh's services reach
its port (the service identity interceptor guards both services): clients read and write memory
through the gateway, which checks who owns what."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from agentmesh.common.v1 import project_owner_service_pb2 as owner_pb
from agentmesh.common.v1 import project_owner_service_pb2_grpc as owner_pb_grpc
from agentmesh.internal.memory.v1 import memory_internal_service_pb2, memory_internal_service_pb2_grpc
from agentmesh.memory.memory import EventLog
from agentmesh.memory.ownership import ProjectOwners
from agentmesh.memory.retention import RetentionSweeper
from agentmesh.memory.servicer import MemoryInternalServicer, MemoryServicer
from agentmesh.memory.settings import MemorySettings
from agentmesh.memory.storage_quota import StoredBytesQuota
from agentmesh.memory.store import SqlEventStore
from agentmesh.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from agentmesh.memory.watch import SessionSignals
from agentmesh.runtime.channels import PeerSecurity, create_channel
from agentmesh.runtime.client import Metadata, unary
from agentmesh.runtime.database import create_engine, create_sqlite_directory, upgrade
from agentmesh.runtime.identity import Access, AuthenticationInterceptor, TokenCodec, bearer_metadata
from agentmesh.runtime.pagination import PageTokenCodec
from agentmesh.runtime.revocation import RevocationCheck, registry_credential_status
from agentmesh.runtime.server import ServiceBinding, start_service_server
from agentmesh.runtime.service import RunningService
from agentmesh.runtime.service_identity import ServiceCredentials, ServiceIdentityInterceptor

SERVICE = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"]
SERVICE_NAME = SERVICE.full_name
INTERNAL_SERVICE = memory_internal_service_pb2.DESCRIPTOR.services_by_name["MemoryInternalService"]
MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version_memory"
PAGE_TOKEN_PURPOSE = "agentmesh.memory.page-token"
# Any valid token reads and writes (the caller is a mesh service: its credential is checked first),
# in projects its user owns (memory/ownership.py; superusers and the system in any);
# erasing a project's sessions is the gateway's, acting for the mesh once the registry deleted it.
ACCESS = {method.name: Access.AUTHENTICATED for method in SERVICE.methods}
# erasing a deleted response's turn is too, once it checked the caller may delete it.
INTERNAL_ACCESS = {"DeleteProjectSessions": Access.SYSTEM, "EraseRun": Access.SYSTEM}


@dataclass(kw_only=True)
class MemoryService(RunningService):
    """The running memory service. Stopping ends the watch streams first (their clients resume
    by seq), so draining does not sit out the grace period on streams that never end by
    themselves."""

    signals: SessionSignals

    async def stop(self, grace_seconds: float = 5.0) -> None:
        self.signals.close()
        await super().stop(grace_seconds)


async def start(settings: MemorySettings) -> RunningService:
    # Every call needs a valid access token (a user's, or a service's system token).
    tokens = TokenCodec(settings.jwt_secret.get_secret_value())
    await asyncio.to_thread(create_sqlite_directory, settings.database_url)
    engine = create_engine(settings.database_url)
    closers: list[Callable[[], Awaitable[object]]] = [engine.dispose]
    try:
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        store = SqlEventStore(engine, group_commit=settings.group_commit)
        signals = SessionSignals()
        credentials = ServiceCredentials(settings.jwt_secret.get_secret_value(), service="memory")
        revocation, owner_of, quota = None, None, None
        if settings.registry_address:
            # Memory's one peer: the registry, asked whether a caller's token still stands and who
            # owns a project.
            registry_channel = create_channel(
                settings.registry_address,
                max_message_bytes=settings.max_message_bytes,
                security=PeerSecurity(credentials, settings.tls()),
            )
            closers.append(registry_channel.close)
            revocation = RevocationCheck(
                registry_credential_status(registry_channel, system_metadata=_system_metadata(tokens))
            )
            projects = _RegistryProjects(registry_channel, system_metadata=_system_metadata(tokens))
            owner_of = projects.owner_of
            quota = StoredBytesQuota(
                limit_of=projects.stored_bytes_limit,
                stored_bytes_of=store.stored_bytes,
                # Room comes back only as retention removes events: no sooner than its next sweep.
                retry_after_seconds=settings.retention_sweep_seconds,
                ttl_seconds=settings.project_limits_ttl_seconds,
            )
        log = EventLog(
            store,
            signals,
            page_tokens=PageTokenCodec.from_secret(
                settings.jwt_secret.get_secret_value(), purpose=PAGE_TOKEN_PURPOSE
            ),
            max_event_bytes=settings.max_event_bytes,
            max_batch_events=settings.max_batch_events,
            max_page_bytes=settings.max_page_bytes,
            watch_poll_seconds=settings.watch_poll_seconds,
            watch_batch_events=settings.watch_batch_events,
            quota=quota,
        )
        servicer = MemoryServicer(log, ProjectOwners(engine, owner_of=owner_of))
        internal = MemoryInternalServicer(log)
        server = await start_service_server(
            settings,
            [
                ServiceBinding(
                    SERVICE_NAME,
                    lambda s: memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(servicer, s),
                ),
                ServiceBinding(
                    INTERNAL_SERVICE.full_name,
                    lambda s: memory_internal_service_pb2_grpc.add_MemoryInternalServiceServicer_to_server(
                        internal, s
                    ),
                ),
            ],
            interceptors=[
                ServiceIdentityInterceptor(credentials, [SERVICE, INTERNAL_SERVICE]),
                AuthenticationInterceptor(tokens, SERVICE, ACCESS, revocation=revocation),
                AuthenticationInterceptor(tokens, INTERNAL_SERVICE, INTERNAL_ACCESS, revocation=revocation),
            ],
        )
    except BaseException:
        for close in closers:
            await close()
        raise
    sweeper = RetentionSweeper(
        store, interval_seconds=settings.retention_sweep_seconds, batch_events=settings.retention_batch_events
    )
    sweeper.start()
    return MemoryService(
        name="memory", server=server, closers=[*closers, store.close, sweeper.stop], signals=signals
    )


def _system_metadata(tokens: TokenCodec) -> Callable[[], Metadata | None]:
    return lambda: bearer_metadata(tokens.system_token())


class _RegistryProjects:
    """What memory asks the registry of a project (ProjectOwnerService), as the system principal:
    who owns it, and its stored_bytes limit in force."""

    def __init__(self, channel: grpc.aio.Channel, *, system_metadata: Callable[[], Metadata | None]) -> None:
        self._stub = owner_pb_grpc.ProjectOwnerServiceStub(channel)
        self._metadata = system_metadata

    async def owner_of(self, project_id: str) -> str:
        request = owner_pb.GetProjectOwnerRequest(project_id=project_id)
        return str((await unary(self._stub.GetProjectOwner, request, metadata=self._metadata())).owner_id)

    async def stored_bytes_limit(self, project_id: str) -> int:
        request = owner_pb.GetProjectStoredBytesLimitRequest(project_id=project_id)
        answer = await unary(self._stub.GetProjectStoredBytesLimit, request, metadata=self._metadata())
        return int(answer.stored_bytes)
