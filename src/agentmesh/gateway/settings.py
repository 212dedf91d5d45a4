"""Gateway configuration, from `AGENTMESH_GATEWAY_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentmesh.runtime.settings import MiB, ServiceSettings, shared


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_GATEWAY_", extra="ignore", populate_by_name=True)

    port: int = Field(default=50050, ge=0, le=65535)
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8080, ge=0, le=65535)
    registry_address: str = shared("127.0.0.1:50051", "registry_address", service="gateway")
    memory_address: str = shared("127.0.0.1:50052", "memory_address", service="gateway")
    executor_addresses: list[str] = shared([], "executor_addresses", service="gateway")
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="gateway")
    max_chat_message_bytes: int = Field(default=256 * 1024, gt=0)
    max_request_body_bytes: int = Field(default=1 * MiB, gt=0)
    executor_health_interval_seconds: float = Field(default=2.0, gt=0)
    chat_timeout_seconds: float = Field(default=600.0, gt=0)
