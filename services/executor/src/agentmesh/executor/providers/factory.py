"""Picks and builds an agent's models.

`mock` when the agent has scripted responses or names the mock model; otherwise each of
`primary_model` and `fallback_models` is `provider/model` on an OpenAI-compatible endpoint from
the settings (`openai/gpt-4o-mini`, `ollama/smollm2:135m`; a name without a provider means
`openai`). One SDK client per endpoint and key is shared by every agent of the executor, so its
connection pool stays warm across sessions.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from google.protobuf import json_format, struct_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.errors import ModelUnavailable
from agentmesh.executor.providers.base import ChatModel, Message, ModelChunk, ModelError, ToolSpec
from agentmesh.executor.providers.mock import MockModel
from agentmesh.executor.providers.pricing import Price
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.executor.settings import ExecutorSettings, ProviderSettings
from agentmesh.registry.v1 import resources_pb2

if TYPE_CHECKING:  # the SDK is imported when an OpenAI model is built: it is slow to import
    import openai

logger = logging.getLogger(__name__)

MOCK = "mock"
DEFAULT_PROVIDER = "openai"
# Endpoints that never answer without a key: a missing one is a configuration error, said at once
# (keyless OpenAI-compatible servers such as Ollama are fine without).
_KEYED_HOSTS = {"api.openai.com"}


@dataclass(frozen=True)
class ModelTarget:
    """One model on one endpoint. `api_key` is the secret itself (hidden from repr); only its
    SHA-256 enters signatures."""

    provider: str
    model: str
    base_url: str
    api_key: str = field(repr=False)
    # Where an operator sets the key (a setting's name or a file's path, never the key itself):
    # what errors name when the endpoint refuses it.
    key_setting: str = ""

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def api_key_sha256(self) -> str:
        # The hash of the FULL key: two keys sharing a prefix must not share a cache entry.
        return hashlib.sha256(self.api_key.encode()).hexdigest()

    def signature(self) -> dict[str, str]:
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_sha256": self.api_key_sha256,
        }


@dataclass(frozen=True)
class ModelPlan:
    """Which models an agent runs with, before any client is made."""

    name: str
    params: Mapping[str, Any]
    mock_responses: Sequence[Any] | None = None
    targets: Sequence[ModelTarget] = ()
    # The model that summarizes history beyond the prompt's budget (None: the agent's own).
    compaction: ModelPlan | None = None

    @property
    def is_mock(self) -> bool:
        return self.mock_responses is not None

    def signature(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": dict(self.params),
            "mock_responses": list(self.mock_responses) if self.mock_responses is not None else None,
            "targets": [t.signature() for t in self.targets],
            "compaction": self.compaction.signature() if self.compaction else None,
        }


class ModelBinding:
    """An agent's models, ready: `for_run()` gives the `ChatModel` one run uses."""

    def __init__(
        self,
        plan: ModelPlan,
        models: Sequence[ChatModel],
        *,
        chunk_chars: int,
        compaction: ModelBinding | None = None,
        mock_price: Price | None = None,
    ) -> None:
        self.plan = plan
        self._models = list(models)
        self._chunk_chars = chunk_chars
        self._compaction = compaction
        self._mock_price = mock_price

    @property
    def takes_tool_choice(self) -> bool:
        """Whether its models take OpenAI's `tool_choice` as a model param (`for_run(params)`),
        sent in their request: every OpenAI-compatible endpoint's does; a mock script's does not."""
        return not self.plan.is_mock

    def for_compaction(self) -> ChatModel:
        """The model that summarizes history beyond the prompt's budget: the agent type's
        compaction model, else the agent's own (a fresh script for a mock)."""
        return self._compaction.for_run() if self._compaction is not None else self.for_run()

    def for_run(
        self,
        params: Mapping[str, Any] | None = None,
        *,
        on_fallback: Callable[[], None] | None = None,
        answered_steps: int = 0,
    ) -> ChatModel:
        """The model one run uses, with that run's per-message `params` on top of the agent's;
        `on_fallback` is called when a fallback model takes over from the primary.
        `answered_steps`: steps of a resumed run answered before (only the script cares)."""
        if self.plan.is_mock:
            # The script restarts with every run (the i-th call of a run answers item i).
            return MockModel(
                self.plan.mock_responses or [],
                name=self.plan.name,
                chunk_chars=self._chunk_chars,
                answered=answered_steps,
                price=self._mock_price,
            )
        models = [_with_params(model, params or {}) for model in self._models]
        if len(models) == 1:
            return models[0]
        return FallbackModel(models, on_fallback=on_fallback)


def _with_params(model: ChatModel, params: Mapping[str, Any]) -> ChatModel:
    with_params = getattr(model, "with_params", None)
    return with_params(params) if with_params is not None else model


def message_params(settings: run_pb2.ModelSettings) -> dict[str, Any]:
    """The model params of a chat's per-message settings (those it sets)."""
    params: dict[str, Any] = {}
    if settings.HasField("temperature"):
        params["temperature"] = settings.temperature
    if settings.HasField("max_tokens"):
        params["max_tokens"] = settings.max_tokens
    if settings.reasoning_effort:
        params["reasoning_effort"] = settings.reasoning_effort
    return params


def recorded_settings(settings: run_pb2.ModelSettings) -> dict[str, Any]:
    """A chat's per-message settings as its input event's metadata records them (those it sets,
    by their proto names), so a run resumed on another executor goes on with them
    (`settings_from_record`; docs/durability.md, "Resumption from the log"). Empty when none is set."""
    return json_format.MessageToDict(settings, preserving_proto_field_name=True)


def settings_from_record(recorded: struct_pb2.Struct) -> run_pb2.ModelSettings:
    """The per-message settings `recorded_settings` wrote (a Struct's numbers are doubles: the
    integer fields parse back whole); fields this executor does not know are skipped, and a
    record it cannot read leaves the run with the agent's own settings rather than stuck."""
    try:
        return json_format.ParseDict(
            json_format.MessageToDict(recorded), run_pb2.ModelSettings(), ignore_unknown_fields=True
        )
    except json_format.ParseError as error:
        logger.warning("the recorded per-message model settings cannot be read (%s): going without", error)
        return run_pb2.ModelSettings()


class FallbackModel:
    """Tries models in order: the next one when the previous failed with a retryable error
    (after its own retries) before streaming anything."""

    def __init__(self, models: Sequence[ChatModel], *, on_fallback: Callable[[], None] | None = None) -> None:
        self._models = list(models)
        self._on_fallback = on_fallback
        self.system = self._models[0].system
        self.name = self._models[0].name

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[ModelChunk]:
        for index, model in enumerate(self._models):
            yielded = False
            try:
                async for chunk in model.stream(messages, tools):
                    yielded = True
                    yield chunk
                return
            except ModelError as error:
                if yielded or not error.retryable or index == len(self._models) - 1:
                    raise
                logger.warning(
                    "model %s failed (%s); falling back to %s",
                    model.name,
                    error,
                    self._models[index + 1].name,
                )
                if self._on_fallback is not None:
                    self._on_fallback()


class ModelFactory:
    """Plans and builds agents' models from their specs and the executor's provider settings."""

    def __init__(self, settings: ExecutorSettings, *, secrets: Secrets | None = None) -> None:
        self._settings = settings
        # The keys it reads join the executor's secrets, scrubbed from every error and event.
        self.secrets = secrets or Secrets()
        self._clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}

    async def plan(self, spec: resources_pb2.AgentSpec) -> ModelPlan:
        """The agent's models. FAILED_PRECONDITION (MODEL_UNAVAILABLE) for an unknown provider."""
        params = json_format.MessageToDict(spec.model_params) if spec.HasField("model_params") else {}
        responses = json_format.MessageToDict(spec.mock_responses) if spec.HasField("mock_responses") else []
        name = spec.primary_model or MOCK
        compaction = await self._compaction_plan(spec.compaction_model) if spec.compaction_model else None
        if responses or name.partition("/")[0] == MOCK:
            return ModelPlan(name=name, params=params, mock_responses=responses, compaction=compaction)
        names = [name, *(m for m in spec.fallback_models if m and m != name)]
        targets = [await self._target(model_name) for model_name in names]
        return ModelPlan(name=name, params=params, targets=targets, compaction=compaction)

    async def _compaction_plan(self, name: str) -> ModelPlan:
        """The plan of a compaction model: one model, without the agent's params (a mock one
        echoes what it is asked to summarize)."""
        if name.partition("/")[0] == MOCK:
            return ModelPlan(name=name, params={}, mock_responses=[])
        return ModelPlan(name=name, params={}, targets=[await self._target(name)])

    def bind(self, plan: ModelPlan) -> ModelBinding:
        models: list[ChatModel] = []
        if plan.targets:
            from agentmesh.executor.providers.openai import OpenAIChatModel, RetryPolicy
        for target in plan.targets:
            models.append(
                OpenAIChatModel(
                    self._client(target),
                    target.model,
                    name=target.name,
                    params=plan.params,
                    retry=RetryPolicy(
                        max_retries=self._settings.model_max_retries,
                        initial_backoff_seconds=self._settings.model_retry_initial_backoff_seconds,
                        max_backoff_seconds=self._settings.model_retry_max_backoff_seconds,
                    ),
                    timeout_seconds=self._settings.model_timeout_seconds,
                    secrets=self.secrets,
                    key_setting=target.key_setting,
                    price=self.price(target.name),
                )
            )
        compaction = self.bind(plan.compaction) if plan.compaction is not None else None
        return ModelBinding(
            plan,
            models,
            chunk_chars=self._settings.text_chunk_chars,
            compaction=compaction,
            mock_price=self.price(plan.name),
        )

    def price(self, model: str) -> Price | None:
        """What the operator set `model` to cost; None when nothing (its cost is unknown)."""
        price = self._settings.model_prices.get(model)
        if price is None:
            return None
        return Price(
            price.input_per_million_tokens,
            price.output_per_million_tokens,
            price.cached_input_per_million_tokens,
        )

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            try:
                await client.close()
            except Exception:
                logger.exception("could not close a model client")

    async def _target(self, name: str) -> ModelTarget:
        provider, slash, model = name.partition("/")
        if not slash:
            provider, model = DEFAULT_PROVIDER, name
        settings = self._settings.providers.get(provider)
        if settings is None or not model:
            raise ModelUnavailable(
                f"model {name!r}: provider {provider!r} is not configured on this executor",
                metadata={"model": name},
            )
        api_key = settings.api_key.get_secret_value()
        key_setting = _key_setting(provider, settings)
        if settings.api_key_file is not None:
            api_key = await asyncio.to_thread(_read_secret, settings.api_key_file)
        base_url = settings.base_url.rstrip("/")
        if not api_key and _needs_key(base_url):
            raise ModelUnavailable(
                f"model {name!r} needs an API key and none is configured: set {key_setting}",
                metadata={"model": name},
            )
        self.secrets.add(api_key)
        return ModelTarget(provider, model, base_url, api_key, key_setting)

    def providers(self) -> list[tuple[str, str]]:
        """Each model provider this executor has, with what keeps it from answering that can be
        told without calling it (empty when nothing does): what the executor tells the registry,
        so a declared agent is checked against it."""
        statuses = [(MOCK, "")]
        for provider, settings in sorted(self._settings.providers.items()):
            problem = ""
            if settings.api_key_file is not None:
                if not os.access(settings.api_key_file, os.R_OK):
                    problem = f"the executors cannot read the key file of provider {provider!r}"
            elif not settings.api_key.get_secret_value() and _needs_key(settings.base_url):
                problem = (
                    f"the executors have no API key for provider {provider!r}: "
                    f"set {_key_setting(provider, settings)} on them"
                )
            statuses.append((provider, problem))
        return statuses

    def _client(self, target: ModelTarget) -> openai.AsyncOpenAI:
        key = (target.base_url, target.api_key_sha256)
        client = self._clients.get(key)
        if client is None:
            import openai

            # max_retries=0: OpenAIChatModel owns the retry policy. A keyless endpoint (Ollama)
            # still needs a non-empty key for the SDK; an explicit key keeps OPENAI_API_KEY unread.
            client = openai.AsyncOpenAI(
                base_url=target.base_url,
                api_key=target.api_key or "unused",
                max_retries=0,
                timeout=self._settings.model_timeout_seconds,
            )
            self._clients[key] = client
        return client


def _key_setting(provider: str, settings: ProviderSettings) -> str:
    """Where an operator sets a provider's key: a setting's name or a file's path, never the key."""
    if settings.api_key_file is not None:
        return f"the key file {settings.api_key_file}"
    if provider == DEFAULT_PROVIDER:
        return "AGENTMESH_OPENAI_API_KEY"
    return f"AGENTMESH_EXECUTOR_PROVIDERS[{provider!r}].api_key"


def _needs_key(base_url: str) -> bool:
    return urlsplit(base_url.rstrip("/")).hostname in _KEYED_HOSTS


def _read_secret(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as error:
        raise ModelUnavailable(
            f"cannot read the API key file of a model provider ({error.strerror})"
        ) from None
