"""Gateway configuration, from `AGENTMESH_GATEWAY_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from agentmesh.gateway.client_address import parse_networks
from agentmesh.runtime.settings import MiB, ServiceSettings, shared


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_GATEWAY_", extra="ignore", populate_by_name=True)

    port: int = Field(default=50050, ge=0, le=65535)
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8080, ge=0, le=65535)
    # The URL clients reach the HTTP face at (agent cards name it); defaults to the bound address.
    public_url: str = ""
    # The `host:port` clients reach the public gRPC port at (A2A cards name it for the gRPC
    # binding); defaults to the bound address.
    public_grpc_address: str = ""
    # How long CancelTask (A2A) waits for the cancelled run's end to be recorded.
    a2a_cancel_wait_seconds: float = Field(default=30.0, gt=0)
    registry_address: str = shared("127.0.0.1:50051", "registry_address", service="gateway")
    memory_address: str = shared("127.0.0.1:50052", "memory_address", service="gateway")
    # Static executors; with discovery on, the registry's pool membership (ListExecutors) is
    # added to these.
    executor_addresses: list[str] = shared([], "executor_addresses", service="gateway")
    executor_discovery: bool = Field(
        default=True, description="also route to executors registered in the registry"
    )
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="gateway")

    # Limits on what one request may carry.
    max_chat_message_bytes: int = Field(default=256 * 1024, gt=0)
    max_chat_messages: int = Field(default=256, gt=0, description="messages in one chat completion request")
    max_request_body_bytes: int = Field(default=1 * MiB, gt=0)

    # Per-user rate limit: a token bucket of `rate_limit_burst` requests refilled at
    # `rate_limit_per_second`. 0 per second disables the limit.
    rate_limit_per_second: float = Field(default=50.0, ge=0)
    rate_limit_burst: int = Field(default=200, gt=0)
    # Project limits counted here (project_limits.py): how long a project's limits, as the
    # registry gives them, are reused before it is asked again (a changed limit holds within it).
    project_limits_ttl_seconds: float = Field(default=2.0, gt=0, le=10)
    # Streams one user may hold open at once through this gateway (0: no cap), whatever project.
    max_open_streams_per_user: int = Field(default=0, ge=0)
    access_grant_ttl_seconds: float = Field(
        default=5.0,
        ge=0,
        description="how long a passed project-ownership check is reused per token (0: never); "
        "the services behind the gateway check again regardless",
    )

    # Revocation: how long a user's token version and an API key's validity are reused per
    # gateway before the registry is asked again (at most 1 s: revocation takes effect within it).
    credential_check_interval_seconds: float = Field(default=1.0, gt=0, le=1.0)
    # Failed API keys per client address: a bucket of `failed_api_key_burst` refilled at
    # `failed_api_key_rate_per_second`; an address out of it gets 429 without a lookup.
    failed_api_key_rate_per_second: float = Field(default=1.0, ge=0)
    failed_api_key_burst: int = Field(default=10, gt=0)
    # Registrations (sign-ups) per client address, counted by each gateway: at most
    # `registration_max_per_address` in any `registration_window_seconds` (a bucket of that many,
    # refilled over the window); past it, 429 / RESOURCE_EXHAUSTED with Retry-After. 0 disables.
    registration_max_per_address: int = Field(default=10, ge=0)
    registration_window_seconds: float = Field(default=3600.0, gt=0)
    # Proxies (CIDRs or addresses) whose X-Forwarded-For names the client: behind a reverse proxy
    # the client's address, not the proxy's, is what failed API keys are counted against. A JSON
    # list or comma-separated. Empty: X-Forwarded-For is never read (any client can send it).
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _cidrs(cls, value: object) -> object:
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        if isinstance(value, list):
            value = [str(cidr).strip() for cidr in value if str(cidr).strip()]
            parse_networks(value)  # a bad CIDR stops the gateway at start, named
        return value

    executor_health_interval_seconds: float = Field(default=2.0, gt=0)
    executor_refresh_interval_seconds: float = Field(default=5.0, gt=0)
    chat_timeout_seconds: float = Field(default=600.0, gt=0)
    # How often this gateway claims the schedules' due firings (0: it fires none).
    schedule_poll_seconds: float = Field(default=1.0, ge=0)
    # How long in-flight HTTP requests (streams included) may take to finish when stopping.
    http_shutdown_grace_seconds: float = Field(default=5.0, ge=0)
