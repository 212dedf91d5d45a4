"""Registry configuration, from `AGENTMESH_REGISTRY_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentmesh.runtime.settings import ServiceSettings, shared


class RegistrySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_REGISTRY_", extra="ignore", populate_by_name=True)

    database_url: str = shared(
        "sqlite+aiosqlite:///./.agentmesh/registry.db", "database_url", service="registry"
    )
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="registry")
    access_token_ttl_seconds: int = Field(default=900, gt=0)
    refresh_token_ttl_seconds: int = Field(default=14 * 24 * 3600, gt=0)
    superuser_email: str = shared("", "superuser_email", service="registry")
    superuser_password: SecretStr = shared(SecretStr(""), "superuser_password", service="registry")
    executor_heartbeat_ttl_seconds: float = Field(default=30.0, gt=0)
