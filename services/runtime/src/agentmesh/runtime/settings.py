"""Settings base: every service reads its configuration from `AGENTMESH_*` environment variables
in one pydantic-settings class, validated at start and passed down explicitly."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1024 * 1024


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
