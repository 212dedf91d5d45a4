"""Executor configuration, from `AGENTMESH_EXECUTOR_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentmesh.runtime.settings import ServiceSettings, shared


class ExecutorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_EXECUTOR_", extra="ignore", populate_by_name=True)

    registry_address: str = shared("127.0.0.1:50051", "registry_address", service="executor")
    memory_address: str = shared("127.0.0.1:50052", "memory_address", service="executor")
    # Executors that delegated runs may go to (besides those registered in the registry); empty
    # means "this executor itself".
    executor_addresses: list[str] = shared([], "executor_addresses", service="executor")
    # host:port other services dial to reach this executor (defaults to the bound address).
    advertise_address: str = ""
    executor_id: str = ""
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="executor")
    max_concurrent_runs: int = Field(default=256, gt=0)
    max_delegation_depth: int = Field(default=5, ge=0)
    history_window_events: int = Field(default=50, gt=0)
    tool_timeout_seconds: float = Field(default=30.0, gt=0)
    model_timeout_seconds: float = Field(default=120.0, gt=0)
    text_chunk_chars: int = Field(default=64, gt=0, description="stream text in chunks of about this size")
    cache_max_entries: int = Field(default=256, gt=0)
    cache_idle_ttl_seconds: float = Field(default=900.0, gt=0)
    loop_safety_max_iterations: int = Field(default=100, gt=0)
    openai_base_url: str = shared("https://api.openai.com/v1", "openai_base_url", service="executor")
    openai_api_key: SecretStr = shared(SecretStr(""), "openai_api_key", service="executor")
