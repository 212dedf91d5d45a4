"""Executor configuration, from `AGENTMESH_EXECUTOR_*` (or the shared `AGENTMESH_*`) variables."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from agentmesh.runtime.egress import allow_entries
from agentmesh.runtime.settings import MiB, ServiceSettings, shared


class ProviderSettings(BaseModel):
    """An OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, LM Studio, LiteLLM).

    The API key is given inline (`api_key`) or as a secret reference: `api_key_file`, a file
    holding the key (a mounted Kubernetes or compose secret), read when an agent is built.
    """

    model_config = {"extra": "forbid"}

    base_url: str
    api_key: SecretStr = SecretStr("")
    api_key_file: Path | None = None


class ModelPrice(BaseModel):
    """What a model costs, in US dollars per million tokens (cached prompt tokens: as other prompt
    tokens unless set)."""

    model_config = {"extra": "forbid"}

    input_per_million_tokens: float = Field(default=0.0, ge=0)
    output_per_million_tokens: float = Field(default=0.0, ge=0)
    cached_input_per_million_tokens: float | None = Field(default=None, ge=0)


class ExecutorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTMESH_EXECUTOR_", extra="ignore", populate_by_name=True)

    registry_address: str = shared("127.0.0.1:50051", "registry_address", service="executor")
    memory_address: str = shared("127.0.0.1:50052", "memory_address", service="executor")
    # Executors that delegated runs may go to, besides those registered in the registry (when
    # `executor_discovery` is on); none at all means "this executor itself".
    executor_addresses: list[str] = shared([], "executor_addresses", service="executor")
    executor_discovery: bool = Field(
        default=True, description="also delegate to the executors registered in the registry"
    )
    executor_refresh_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description="how often the registry's executor list is asked for",
        # AGENTMESH_EXECUTOR_EXECUTOR_REFRESH_SECONDS is the name this had before the gateway's
        # and the executor's routing became one; still read, deprecated.
        validation_alias=AliasChoices(
            "AGENTMESH_EXECUTOR_EXECUTOR_REFRESH_INTERVAL_SECONDS",
            "executor_refresh_interval_seconds",
            "AGENTMESH_EXECUTOR_EXECUTOR_REFRESH_SECONDS",
            "executor_refresh_seconds",
        ),
    )
    executor_health_interval_seconds: float = Field(default=2.0, gt=0, description="peer health checks")
    heartbeat_interval_seconds: float = Field(default=10.0, gt=0)
    lease_renew_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        description="longest between renewals of this executor's run leases (at most a third of the lease)",
    )
    lease_max_orphans: int = Field(
        default=16, ge=0, description="runs of dead executors taken over per renewal (0: none)"
    )
    resume_max_times: int = Field(
        default=3,
        ge=0,
        description="a run taken over after this many resumes fails (RESUME_LIMIT); 0: never resume",
    )
    # host:port other services dial to reach this executor (defaults to the bound address).
    advertise_address: str = ""
    executor_id: str = ""
    jwt_secret: SecretStr = shared(SecretStr(""), "jwt_secret", service="executor")

    max_concurrent_runs: int = Field(default=256, gt=0)
    max_delegation_depth: int = Field(default=5, ge=0)
    max_delegations_per_step: int = Field(
        default=4,
        gt=0,
        description="delegations one model step may send, for agent types that set none "
        "(DelegationLimits.max_per_step); the step's others are refused",
    )
    max_delegations_per_chat: int = Field(
        default=50,
        gt=0,
        description="delegations the whole tree under one chat may send, for agent types that set none "
        "(DelegationLimits.max_per_chat); the tree's others are refused",
    )
    history_window_events: int = Field(default=50, gt=0)
    context_budget_tokens: int = Field(
        default=0,
        ge=0,
        description="the prompt's token budget of agents whose type sets none; 0: no budget, the "
        "history is the last history_window_events events (docs/sessions.md)",
    )
    tool_result_prompt_chars: int = Field(
        default=20_000,
        ge=0,
        description="a tool result longer than this is cut in the prompt (the log keeps all of it); 0: never",
    )
    # The egress policy (runtime/egress.py) for what a tenant points the executor at (remote A2A
    # agents, streamable-HTTP MCP servers): loopback, private, link-local, unique-local addresses
    # and the mesh's own are refused unless listed here — CIDRs, addresses or host names, a JSON
    # list or comma-separated (AGENTMESH_EGRESS_ALLOW).
    egress_allow: Annotated[list[str], NoDecode] = shared([], "egress_allow", service="executor")
    remote_card_timeout_seconds: float = Field(
        default=10.0, gt=0, description="longest a remote A2A agent's card may take to fetch, all told"
    )
    remote_card_max_bytes: int = Field(default=MiB, gt=0, description="a bigger remote agent card is refused")
    default_max_steps: int = Field(default=10, gt=0, description="when the agent sets none")
    tool_timeout_seconds: float = Field(default=30.0, gt=0)
    delegation_timeout_seconds: float = Field(default=300.0, gt=0)
    placement_wait_seconds: float = Field(
        default=10.0,
        ge=0,
        description="how long a delegated or sub-agent run waits for an executor of the pool to take "
        "it while every one refuses it for now (busy at its cap, unreachable, restarting)",
    )
    cleanup_timeout_seconds: float = Field(
        default=5.0, gt=0, description="bound on recording a run's end after it was cancelled"
    )
    text_chunk_chars: int = Field(default=64, gt=0, description="stream text in chunks of about this size")
    text_flush_seconds: float = Field(default=0.05, ge=0, description="longest a text chunk is held back")
    event_buffer_size: int = Field(default=256, gt=0, description="events a run may get ahead of its caller")
    loop_safety_max_iterations: int = Field(default=100, gt=0)

    cache_max_entries: int = Field(default=256, gt=0)
    cache_idle_ttl_seconds: float = Field(default=900.0, gt=0)
    cache_sweep_seconds: float = Field(default=30.0, gt=0)
    finish_batch_window_seconds: float = Field(
        default=0.02,
        ge=0,
        description="how long the end of a run waits for others to be reported to the registry with",
    )
    finish_batch_max_runs: int = Field(default=500, gt=0, le=1000)
    agent_spec_cache_size: int = Field(
        default=4096, gt=0, description="resolved agents remembered per caller (revalidated by every run)"
    )
    max_concurrent_starts: int = Field(
        default=32,
        gt=0,
        description="StartAgentRun calls in flight to the registry at once; more runs wait here",
    )
    agent_watch: bool = Field(
        default=True,
        description="keep the registry's WatchAgents stream open: pushed changes keep remembered specs fresh",
    )

    # Models: `openai/<model>` uses these; other providers are named in `providers`.
    openai_base_url: str = shared("https://api.openai.com/v1", "openai_base_url", service="executor")
    openai_api_key: SecretStr = shared(SecretStr(""), "openai_api_key", service="executor")
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="by the model's name as agents give it (provider/model)"
    )
    model_prices_file: Path | None = Field(
        default=None,
        description="a JSON file of more prices shaped as model_prices (which wins for a model in both)",
    )
    model_timeout_seconds: float = Field(default=120.0, gt=0)
    model_max_retries: int = Field(default=2, ge=0)
    model_retry_initial_backoff_seconds: float = Field(default=0.5, ge=0)
    model_retry_max_backoff_seconds: float = Field(default=8.0, ge=0)

    @field_validator("egress_allow", mode="before")
    @classmethod
    def _egress_allow(cls, value: object) -> object:
        return allow_entries(value)

    @model_validator(mode="after")
    def _prices_from_file(self) -> ExecutorSettings:
        if self.model_prices_file is not None:
            try:
                table = json.loads(self.model_prices_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ValueError(f"model_prices_file {self.model_prices_file}: {error}") from None
            if not isinstance(table, dict):
                raise ValueError(f"model_prices_file {self.model_prices_file}: not a JSON object")
            from_file = {name: ModelPrice.model_validate(price) for name, price in table.items()}
            self.model_prices = {**from_file, **self.model_prices}
        return self

    @model_validator(mode="after")
    def _openai_is_a_provider(self) -> ExecutorSettings:
        if "mock" in self.providers:
            raise ValueError("'mock' is the scripted model, not a configurable provider")
        self.providers.setdefault(
            "openai", ProviderSettings(base_url=self.openai_base_url, api_key=self.openai_api_key)
        )
        return self


def process_environment() -> Mapping[str, str]:
    """The executor's own environment, live: where MCP servers' `${env:NAME}` values are read from
    when an agent is built, so operators can keep those secrets out of the registry."""
    return os.environ
