"""Registry configuration, from `AGENTMESH_REGISTRY_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from agentmesh.registry.models import RegistrationMode
from agentmesh.runtime.database import POOL_TIMEOUT_SECONDS
from agentmesh.runtime.egress import allow_entries
from agentmesh.runtime.settings import ServiceSettings, shared


class RegistrySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_REGISTRY_", extra="ignore", populate_by_name=True)

    database_url: str = shared(
        "sqlite+aiosqlite:///./.agentmesh/registry.db", "database_url", service="registry"
    )
    database_pool_size: int = Field(
        default=10, gt=0, description="PostgreSQL connections kept (as many again under bursts)"
    )
    database_pool_timeout_seconds: float = Field(
        default=POOL_TIMEOUT_SECONDS,
        gt=0,
        description="how long a call waits for a free connection before it fails UNAVAILABLE",
    )
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="registry")
    access_token_ttl_seconds: int = Field(default=900, gt=0)
    refresh_token_ttl_seconds: int = Field(default=14 * 24 * 3600, gt=0)
    superuser_email: str = shared("", "superuser_email", service="registry")
    superuser_password: SecretStr = shared(SecretStr(""), "superuser_password", service="registry")
    executor_heartbeat_ttl_seconds: float = Field(default=30.0, gt=0)
    run_lease_seconds: float = Field(
        default=10.0, gt=0, description="a run whose executor has not renewed its lease this long is orphaned"
    )
    run_lease_startup_grace_seconds: float = Field(
        default=30.0,
        ge=0,
        description="after a start, an executor's runs expire only once it renewed (or after this)",
    )
    run_lease_sweep_seconds: float = Field(
        default=1.0, gt=0, description="how often expired leases are looked for"
    )
    schedule_missed_grace_seconds: float = Field(
        default=60.0,
        gt=0,
        description="a schedule's due time claimed later than this is missed (its missed-run policy applies)",
    )

    # Project limits for projects that set none (`projects/limits.py`); 0 is unlimited. A project's
    # `concurrent_runs`, unless fixed here, defaults to its share of the executor pool's run slots.
    default_requests_per_minute: int = Field(default=0, ge=0)
    default_concurrent_runs: int = Field(default=0, ge=0, description="0: the project's share of the pool")
    default_open_streams: int = Field(default=0, ge=0)
    default_tokens_per_day: int = Field(default=0, ge=0)
    default_stored_bytes: int = Field(default=0, ge=0)
    default_tokens_per_month: int = Field(default=0, ge=0)
    default_cost_per_day: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="US dollars")
    default_cost_per_month: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="US dollars")
    # Off by default: the share is a cap, not a queue, so a delegation or a workflow's sub-agent
    # in a small pool, or while an executor is gone, would be refused rather than wait its turn.
    project_share_of_pool: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="of the live executors' run slots, one project's at most (0: none)",
    )

    # argon2id cost; the defaults are OWASP's recommendation (m=19456 KiB, t=2, p=1). Lower them
    # only for tests.
    password_hash_time_cost: int = Field(default=2, ge=1)
    password_hash_memory_kib: int = Field(default=19456, ge=8)
    password_hash_parallelism: int = Field(default=1, ge=1)

    # Sign-in throttling (identity/sign_in_throttle.py), per account from one client address:
    # after `login_max_failures` failures, each within `login_failure_window_seconds` of the
    # previous, sign-in to that account from that address is locked for `login_lockout_seconds`,
    # doubling with each further failure up to the maximum. Per client address across accounts,
    # the same after `login_address_max_failures` failures.
    login_max_failures: int = Field(default=5, ge=1)
    login_address_max_failures: int = Field(
        default=30, ge=1, description="failed sign-ins from one address, any accounts, before it is locked"
    )
    login_failure_window_seconds: float = Field(default=900.0, gt=0)
    login_lockout_seconds: float = Field(default=30.0, gt=0)
    login_max_lockout_seconds: float = Field(default=900.0, gt=0)

    # Who may register themselves (identity/registration.py): `open`, `closed` (superusers create
    # users) or `invite-only` (registering needs an invitation a superuser issued).
    registration_mode: RegistrationMode = RegistrationMode.OPEN
    invitation_ttl_seconds: int = Field(
        default=7 * 24 * 3600, gt=0, le=90 * 24 * 3600, description="how long a new invitation is valid"
    )
    # The password policy applies whenever a password is set; passwords set before keep working.
    password_min_length: int = Field(default=12, ge=8, le=128)

    # The egress policy's allow-list (runtime/egress.py), the executors' own setting read the same
    # way (AGENTMESH_EGRESS_ALLOW): a remote agent's card URL or an MCP server's URL the policy
    # refuses is refused when it is registered, not only when an executor fetches it; webhook
    # deliveries (webhooks/delivery.py) keep to it, and it decides which hosts a webhook may name
    # with plain http.
    egress_allow: Annotated[list[str], NoDecode] = shared([], "egress_allow", service="registry")
    webhook_max_attempts: int = Field(default=8, ge=1, description="attempts per delivery before it fails")
    webhook_backoff_seconds: float = Field(default=5.0, gt=0, description="the first retry's delay, doubling")
    webhook_max_backoff_seconds: float = Field(default=3600.0, gt=0)
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, description="longest one attempt may take")
    webhook_poll_seconds: float = Field(
        default=1.0, gt=0, description="how often due deliveries are looked for"
    )

    @field_validator("egress_allow", mode="before")
    @classmethod
    def _egress_allow(cls, value: object) -> object:
        return allow_entries(value)
