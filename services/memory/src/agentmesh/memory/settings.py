"""Memory configuration, from `AGENTMESH_MEMORY_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from agentmesh.runtime.settings import ServiceSettings, shared


class MemorySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_MEMORY_", extra="ignore", populate_by_name=True)

    database_url: str = shared("sqlite+aiosqlite:///./.agentmesh/memory.db", "database_url", service="memory")
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="memory")
    # The registry memory asks whether a user's token still stands (signed out, deactivated, its
    # API key revoked: runtime/revocation.py), at most once a second per user. Unset: memory
    # checks signatures and expiry only, and a revoked token works on its port until it expires.
    registry_address: str = shared("", "registry_address", service="memory")
    max_event_bytes: int = Field(
        default=256 * 1024, gt=0, description="content plus metadata JSON, per event"
    )
    max_batch_events: int = Field(default=1000, gt=0)
    max_page_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="content plus metadata JSON of the events of one page of ListEvents; a page stops "
        "before it passes this bound (its first event always comes), so it stays under gRPC's message "
        "size whatever page_size asks",
    )
    retention_sweep_seconds: float = Field(default=60.0, gt=0)
    retention_batch_events: int = Field(default=500, gt=0, description="events removed per transaction")
    watch_poll_seconds: float = Field(
        default=0.5, gt=0, description="how often a watcher re-reads, to see appends made by other replicas"
    )
    watch_batch_events: int = Field(default=500, gt=0, description="events a watcher reads per query")
    project_limits_ttl_seconds: float = Field(
        default=2.0,
        gt=0,
        le=10,
        description="how long a project's stored_bytes limit and count, as read, are reused "
        "(storage_quota.py): a changed limit holds within this time",
    )
    group_commit: bool = Field(
        default=True,
        description="PostgreSQL: appends of different sessions that queue meanwhile go in one statement",
    )
