"""Settings base: every service reads its configuration from `AGENTMESH_*` environment variables
in one pydantic-settings class, validated at start and passed down explicitly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentmesh.runtime.tls import TlsFiles

MiB = 1024 * 1024
# Calls that may wait for a server to take them up before gRPC drops new ones (runtime/server.py
# says why it is this high).
DEFAULT_MAX_PENDING_CALLS = 50_000


def shared(default: Any, name: str, *, service: str) -> Any:
    """A field read from `AGENTMESH_<SERVICE>_<NAME>`, falling back to `AGENTMESH_<NAME>`.

    Lets one environment configure several services in one process (`agentmesh up`) while each
    container can still be given its own value.
    """
    upper = name.upper()
    return Field(
        default=default,
        validation_alias=AliasChoices(f"AGENTMESH_{service.upper()}_{upper}", f"AGENTMESH_{upper}", name),
    )


def _process_wide(name: str, *, default: Any = None) -> Any:
    """A field read from `AGENTMESH_<NAME>` whatever the service's prefix."""
    return Field(default=default, validation_alias=AliasChoices(f"AGENTMESH_{name.upper()}", name))


class ServiceSettings(BaseSettings):
    """What every gRPC service has: where it listens, how it drains, how big a message may be.

    Subclasses set `env_prefix` to `AGENTMESH_<SERVICE>_`, so `AGENTMESH_REGISTRY_PORT` sets the
    registry's port.
    """

    model_config = SettingsConfigDict(env_prefix="AGENTMESH_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    max_message_bytes: int = Field(default=4 * MiB, gt=0)
    max_pending_calls: int = Field(default=DEFAULT_MAX_PENDING_CALLS, gt=0)
    # Transport security (runtime/tls.py, docs/security.md): AGENTMESH_TLS_*, the same for every
    # service of a process (each container is given its own). Unset: plaintext.
    tls_cert_file: Path | None = _process_wide("tls_cert_file")
    tls_key_file: Path | None = _process_wide("tls_key_file")
    tls_ca_file: Path | None = _process_wide("tls_ca_file")
    tls_require_client_cert: bool = _process_wide("tls_require_client_cert", default=False)

    def tls(self) -> TlsFiles:
        """The TLS policy these settings give (validated: a half-configured TLS fails at start)."""
        return TlsFiles(
            cert_file=self.tls_cert_file,
            key_file=self.tls_key_file,
            ca_file=self.tls_ca_file,
            require_client_cert=self.tls_require_client_cert,
        )
