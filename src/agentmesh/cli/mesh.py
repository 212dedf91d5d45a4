"""The one place that wires all four services together: `agentmesh up` runs them in one process,
`agentmesh serve NAME` one of them (as a container runs it). Each service's own entry is
`python -m agentmesh.<name>`; this module only picks among them."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:  # importing the runtime costs a second; `agentmesh --help` reads SERVICES
    from agentmesh.registry.app import RegistryService
    from agentmesh.runtime.service import RunningService
    from agentmesh.runtime.settings import ServiceSettings

logger = logging.getLogger(__name__)


class ServiceEntry(NamedTuple):
    """How to configure and start one service."""

    settings: Callable[..., ServiceSettings]
    start: Callable[[Any], Awaitable[RunningService]]


def service_entry(name: str) -> ServiceEntry:
    """The service's settings class and composition root, imported only when asked for (so the
    CLI starts without importing every service)."""
    if name == "registry":
        from agentmesh.registry.app import start
        from agentmesh.registry.settings import RegistrySettings

        return ServiceEntry(RegistrySettings, start)
    if name == "memory":
        from agentmesh.memory.app import start
        from agentmesh.memory.settings import MemorySettings

        return ServiceEntry(MemorySettings, start)
    if name == "executor":
        from agentmesh.executor.app import start
        from agentmesh.executor.settings import ExecutorSettings

        return ServiceEntry(ExecutorSettings, start)
    if name == "gateway":
        from agentmesh.gateway.app import start
        from agentmesh.gateway.settings import GatewaySettings

        return ServiceEntry(GatewaySettings, start)
    raise KeyError(name)


SERVICES = ("registry", "memory", "executor", "gateway")


def load_settings(name: str, **overrides: Any) -> Any:
    return service_entry(name).settings(**overrides)


async def start_service(name: str, settings: Any) -> RunningService:
    return await service_entry(name).start(settings)


@dataclass
class Mesh:
    """All four services started on one host."""

    services: dict[str, RunningService]

    @property
    def gateway(self) -> Any:
        return self.services["gateway"]

    async def stop(self, grace_seconds: float = 5.0) -> None:
        # The edge first, so no new work arrives while the services behind it drain.
        for name in reversed(SERVICES):
            if name in self.services:
                await self.services[name].stop(grace_seconds)


class LocalAdmin(NamedTuple):
    """The superuser `agentmesh up` made on a mesh with no user; the password exists nowhere else."""

    email: str
    password: str


LOCAL_ADMIN_EMAIL = "admin@agentmesh.local"


async def create_local_admin(mesh: Mesh) -> LocalAdmin | None:
    """A superuser with a generated password for an embedded mesh whose registry has no user at all
    and was given none to make (`AGENTMESH_SUPERUSER_*`), so that it is usable at once; None
    otherwise. The caller shows the password, once: it is never logged."""
    registry = cast("RegistryService", mesh.services["registry"])
    if registry.settings.superuser_email:
        return None
    password = secrets.token_urlsafe(18)
    user = await registry.accounts.create_first_user(email=LOCAL_ADMIN_EMAIL, password=password)
    return LocalAdmin(user.email, password) if user is not None else None


def jwt_secret_for(data_dir: Path) -> str:
    """The embedded mesh's signing secret: made once, kept in the data directory (mode 600)."""
    path = data_dir / "jwt_secret"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(48))
    return path.read_text().strip()


async def start_mesh(
    *,
    data_dir: Path,
    grpc_port: int = 50050,
    http_port: int = 8080,
    host: str = "127.0.0.1",
    database_url: str | None = None,
    jwt_secret: str | None = None,
    registry_port: int = 0,
    memory_port: int = 0,
    executor_port: int = 0,
    extra: dict[str, dict[str, Any]] | None = None,
    allow_loopback_egress: bool = False,
) -> Mesh:
    """Starts registry, memory, executor and gateway in this process, each its own gRPC server.

    Settings come from the environment as usual; the arguments override them. Without a
    database URL (argument or `AGENTMESH_DATABASE_URL`), SQLite files in `data_dir` are used.
    `allow_loopback_egress` adds loopback to the egress allow-list (remote agents, MCP servers and
    webhook receivers on this machine, for local development).
    """
    from agentmesh.runtime.egress import LOOPBACK
    from agentmesh.runtime.server import check_port_free

    # The gateway's public ports are the ones a user picks (and finds taken): refused before any
    # service starts, there is nothing half-started to stop.
    check_port_free(host, grpc_port)
    check_port_free(host, http_port)
    extra = {name: dict(settings) for name, settings in (extra or {}).items()}
    if allow_loopback_egress:
        # The executors fetch; the registry refuses at registration what they would, and delivers
        # webhooks: both allow it.
        for name in ("executor", "registry"):
            given = extra.setdefault(name, {})
            allowed = given.get("egress_allow", load_settings(name).egress_allow)
            given["egress_allow"] = [*allowed, *LOOPBACK]
    secret = (
        jwt_secret
        or load_settings("registry").jwt_secret.get_secret_value()
        or await asyncio.to_thread(jwt_secret_for, data_dir)
    )

    def database(name: str) -> dict[str, str]:
        if database_url:
            return {"database_url": database_url}
        if load_settings(name).model_fields_set & {"database_url"}:
            return {}
        return {"database_url": f"sqlite+aiosqlite:///{(data_dir / f'{name}.db').resolve()}"}

    services: dict[str, RunningService] = {}
    mesh = Mesh(services)
    try:
        services["registry"] = await start_service(
            "registry",
            load_settings(
                "registry",
                host=host,
                port=registry_port,
                jwt_secret=secret,
                **database("registry"),
                **extra.get("registry", {}),
            ),
        )
        services["memory"] = await start_service(
            "memory",
            load_settings(
                "memory",
                host=host,
                port=memory_port,
                jwt_secret=secret,
                registry_address=services["registry"].address,
                **database("memory"),
                **extra.get("memory", {}),
            ),
        )
        peers = {
            "registry_address": services["registry"].address,
            "memory_address": services["memory"].address,
        }
        services["executor"] = await start_service(
            "executor",
            load_settings(
                "executor",
                host=host,
                port=executor_port,
                jwt_secret=secret,
                **peers,
                **extra.get("executor", {}),
            ),
        )
        services["gateway"] = await start_service(
            "gateway",
            load_settings(
                "gateway",
                host=host,
                port=grpc_port,
                http_host=host,
                http_port=http_port,
                jwt_secret=secret,
                executor_addresses=[services["executor"].address],
                **peers,
                **extra.get("gateway", {}),
            ),
        )
    except BaseException:
        await mesh.stop(0)
        raise
    return mesh
