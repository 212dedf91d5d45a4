"""Metrics through the OpenTelemetry metrics API, served to Prometheus: one small typed API for
everything agentmesh counts.

`configure_metrics(service)` installs the process's meter provider and, when a port is set,
serves `/metrics` in the Prometheus text format on `AGENTMESH_<SERVICE>_METRICS_PORT` (else
`AGENTMESH_METRICS_PORT`), bound to `AGENTMESH_<SERVICE>_METRICS_HOST` / `AGENTMESH_METRICS_HOST`
(default 127.0.0.1). Port 0, the default, leaves metrics off: every `record_*` call then returns at
once, so code records unconditionally.

Services call the `record_*` functions on their hot paths (cheap: one histogram or counter update,
no I/O; the scrape does the work) and register `observe_*` callbacks for values they already keep
(the agent cache's size and counters, the runs in flight). Labels are deliberately low-cardinality
and carry no user data: method names, status codes, outcomes, model and tool names — never
session ids, agent or user names, message content, and never a secret.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from opentelemetry import metrics as metrics_api
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

logger = logging.getLogger(__name__)

METER_NAME = "agentmesh"

# Label (attribute) names, besides the span attribute names of `telemetry` that metrics share.
OUTCOME = "outcome"
AGENT_KIND = "agentmesh.agent.kind"
DELEGATED = "agentmesh.delegated"
DELEGATION_DEPTH = "agentmesh.delegation.depth"
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_STATUS = "rpc.response.status_code"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
ERROR_TYPE = "error.type"

RunOutcome = Literal["completed", "max_steps", "failed", "cancelled", "suspended"]
ToolOutcome = Literal["ok", "error", "timeout", "cancelled", "refused"]
DelegationOutcome = Literal["ok", "refused", "timeout", "cancelled", "failed", "input_required"]
AppendOutcome = Literal["ok", "error"]

# Seconds: from a sub-millisecond loopback RPC up to a long model call or run.
_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_SECONDS_BUCKETS += (10.0, 30.0, 60.0, 120.0, 300.0)
# The GenAI conventions' advised boundaries for token counts.
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class MetricsSettings(BaseSettings):
    """Where a process serves its Prometheus endpoint. Read twice by `configure_metrics`: with
    the service's own prefix (`AGENTMESH_EXECUTOR_METRICS_PORT`), then the shared one."""

    model_config = SettingsConfigDict(env_prefix="AGENTMESH_", extra="ignore")

    metrics_port: int = Field(default=0, ge=0, le=65535, description="0 = no endpoint")
    metrics_host: str = "127.0.0.1"


class AgentCacheStats(Protocol):
    """What the agent cache reports: its size and its cumulative counters."""

    @property
    def size(self) -> int: ...
    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def evictions(self) -> int: ...


class _Instruments:
    """The instruments of one meter provider; created by `configure_metrics` only."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(METER_NAME)
        seconds = {"unit": "s", "explicit_bucket_boundaries_advisory": _SECONDS_BUCKETS}
        self.rpc_server_duration = meter.create_histogram(
            "rpc.server.call.duration", description="gRPC calls served, by method and status code", **seconds
        )
        self.rpc_client_duration = meter.create_histogram(
            "rpc.client.call.duration", description="gRPC calls made, by method and status code", **seconds
        )
        self.runs = meter.create_counter("agentmesh.runs", unit="{run}", description="Agent runs ended")
        self.run_duration = meter.create_histogram(
            "agentmesh.run.duration", description="Agent runs, start to end", **seconds
        )
        self.steps = meter.create_counter("agentmesh.steps", unit="{step}", description="Agent loop steps")
        self.model_calls = meter.create_counter(
            "agentmesh.model.calls", unit="{call}", description="Model calls, by model and error type"
        )
        self.model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", description="Model calls, first byte sent to last", **seconds
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens per model call, by token type (input, output)",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.model_tokens = meter.create_counter(
            "agentmesh.model.tokens",
            unit="{token}",
            description="Tokens of model calls, by model and token type (input, output, cached_input)",
        )
        self.model_cost = meter.create_counter(
            "agentmesh.model.cost",
            unit="{USD}",
            description="Cost of the model calls whose model has a price, by model",
        )
        self.unpriced_calls = meter.create_counter(
            "agentmesh.model.unpriced_calls",
            unit="{call}",
            description="Model calls whose model has no price (their cost is unknown), by model",
        )
        self.tool_calls = meter.create_counter(
            "agentmesh.tool.calls", unit="{call}", description="Tool calls, by tool and outcome"
        )
        self.tool_duration = meter.create_histogram(
            "agentmesh.tool.duration", description="Tool calls", **seconds
        )
        self.delegations = meter.create_counter(
            "agentmesh.delegations", unit="{delegation}", description="Delegations ended, by outcome"
        )
        self.delegation_duration = meter.create_histogram(
            "agentmesh.delegation.duration", description="Delegations, request to response", **seconds
        )
        self.memory_append_duration = meter.create_histogram(
            "agentmesh.memory.append.duration", description="Memory appends (one commit)", **seconds
        )
        self.memory_append_batch_size = meter.create_histogram(
            "agentmesh.memory.append.batch_size",
            unit="{event}",
            description="Events stored per memory append commit",
            explicit_bucket_boundaries_advisory=_BATCH_BUCKETS,
        )
        meter.create_observable_gauge(
            "agentmesh.agent_cache.size",
            callbacks=[lambda options: _observe_cache(options, "size")],
            unit="{agent}",
            description="Agent runtimes in the executor's cache",
        )
        for field, description in (
            ("hits", "Agent cache look-ups that found a built runtime"),
            ("misses", "Agent cache look-ups that built a runtime"),
            ("evictions", "Agent runtimes evicted from the cache (LRU cap or idle TTL)"),
        ):
            meter.create_observable_counter(
                f"agentmesh.agent_cache.{field}",
                callbacks=[lambda options, field=field: _observe_cache(options, field)],
                unit="{lookup}" if field != "evictions" else "{agent}",
                description=description,
            )
        meter.create_observable_gauge(
            "agentmesh.process.asyncio_tasks",
            callbacks=[_observe_asyncio_tasks],
            unit="{task}",
            description="Unfinished asyncio tasks of the process's event loop (a leak shows as growth)",
        )
        meter.create_observable_up_down_counter(
            "agentmesh.runs.active",
            callbacks=[_observe_active_runs],
            unit="{run}",
            description="Agent runs in flight",
        )


@dataclass
class MetricsEndpoint:
    """A running Prometheus `/metrics` endpoint."""

    host: str
    port: int
    _stop: Callable[[], None]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def stop(self) -> None:
        self._stop()


@dataclass
class Metrics:
    """The process's metrics: its meter provider and, when configured, its Prometheus endpoint."""

    provider: MeterProvider
    endpoint: MetricsEndpoint | None = None

    def shutdown(self) -> None:
        if self.endpoint is not None:
            self.endpoint.stop()
        self.provider.shutdown()


_instruments: _Instruments | None = None
_global_installed = False
_cache_sources: list[Callable[[], AgentCacheStats]] = []
_active_run_sources: list[Callable[[], int]] = []
_event_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_sources_lock = threading.Lock()


def metrics_settings(service: str | None = None) -> MetricsSettings:
    """The service's metrics settings: `AGENTMESH_<SERVICE>_METRICS_*` over `AGENTMESH_METRICS_*`."""
    shared = MetricsSettings()
    if not service:
        return shared
    own = MetricsSettings(_env_prefix=f"AGENTMESH_{service.upper()}_")  # type: ignore[call-arg]
    return MetricsSettings(
        metrics_port=own.metrics_port if "metrics_port" in own.model_fields_set else shared.metrics_port,
        metrics_host=own.metrics_host if "metrics_host" in own.model_fields_set else shared.metrics_host,
    )


def configure_metrics(
    service: str | None = None,
    *,
    service_name: str | None = None,
    settings: MetricsSettings | None = None,
    readers: Sequence[MetricReader] = (),
) -> Metrics | None:
    """Installs this process's meter provider and starts its Prometheus endpoint when a port is
    set. Returns the handle (shut it down at exit), or None when metrics stay off (no port, no
    readers). `service` picks the settings prefix; `service_name` the `service.name` resource."""
    global _instruments
    settings = settings or metrics_settings(service)
    readers = list(readers)
    endpoint: MetricsEndpoint | None = None
    if settings.metrics_port:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, ProcessCollector

        registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)  # process RSS, CPU and open files beside our metrics
        readers.append(PrometheusMetricReader(registry=registry, scope_info_enabled=False))
        endpoint = _serve(registry, settings.metrics_host, settings.metrics_port)
    if not readers:
        return None
    name = service_name or (f"agentmesh-{service}" if service else "agentmesh")
    provider = MeterProvider(metric_readers=readers, resource=Resource.create({"service.name": name}))
    _instruments = _Instruments(provider)
    _install_global(provider)
    if endpoint is not None:
        logger.info("serving metrics on %s", endpoint.url)
    return Metrics(provider, endpoint)


def _install_global(provider: MeterProvider) -> None:
    """Makes the provider the global one too (once per process: the API refuses a second), so
    libraries recording through the global API — FastAPI's native `http.server.request.duration`
    on the gateway — land on the same endpoint."""
    global _global_installed
    if not _global_installed:
        metrics_api.set_meter_provider(provider)
        _global_installed = True


def _serve(registry, host: str, port: int) -> MetricsEndpoint:
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise OSError(f"cannot serve metrics on {host}:{port}: {error}") from error

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return MetricsEndpoint(host, server.server_address[1], stop)


def enabled() -> bool:
    """Whether recording goes anywhere (callers may skip preparing what only metrics need)."""
    return _instruments is not None


def disable_metrics() -> None:
    """Turns recording off again (tests that installed an in-memory reader)."""
    global _instruments
    _instruments = None


# --- recorded by the shared runtime -------------------------------------------------------------


def record_rpc_server_call(*, service: str, method: str, code: str, seconds: float) -> None:
    """One gRPC call served (the server interceptor calls this)."""
    if _instruments is not None:
        _instruments.rpc_server_duration.record(
            seconds, {RPC_SYSTEM: "grpc", RPC_SERVICE: service, RPC_METHOD: method, RPC_STATUS: code}
        )


def record_rpc_client_call(*, service: str, method: str, code: str, seconds: float) -> None:
    """One gRPC call made (the client interceptor calls this)."""
    if _instruments is not None:
        _instruments.rpc_client_duration.record(
            seconds, {RPC_SYSTEM: "grpc", RPC_SERVICE: service, RPC_METHOD: method, RPC_STATUS: code}
        )


# --- recorded by the executor -------------------------------------------------------------------


def record_run(*, kind: str, outcome: RunOutcome, seconds: float, delegated: bool = False) -> None:
    """One agent run ended. `kind` is the agent kind (`llm`, `sequential`, `parallel`, `loop`);
    `delegated` says whether another agent delegated it."""
    if _instruments is not None:
        attributes = {AGENT_KIND: kind, OUTCOME: outcome, DELEGATED: delegated}
        _instruments.runs.add(1, attributes)
        _instruments.run_duration.record(seconds, attributes)


def record_step(*, kind: str = "llm") -> None:
    """One loop step of a run began."""
    if _instruments is not None:
        _instruments.steps.add(1, {AGENT_KIND: kind})


def record_model_call(
    *,
    system: str,
    model: str,
    seconds: float,
    input_tokens: int = 0,
    output_tokens: int = 0,
    error_type: str = "",
) -> None:
    """One model call ended: its duration and token usage. `error_type` is empty on success, else
    a short class of failure (`cancelled`, or the class name of the exception behind it)."""
    if _instruments is None:
        return
    attributes = {GEN_AI_OPERATION: "chat", GEN_AI_SYSTEM: system, GEN_AI_REQUEST_MODEL: model}
    if error_type:
        attributes[ERROR_TYPE] = error_type
    _instruments.model_calls.add(1, attributes)
    _instruments.model_duration.record(seconds, attributes)
    if input_tokens:
        _instruments.tokens.record(input_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "input"})
    if output_tokens:
        _instruments.tokens.record(output_tokens, {**attributes, GEN_AI_TOKEN_TYPE: "output"})


def record_model_spend(
    *,
    system: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int,
    cost: float | None,
) -> None:
    """What one answered model call used, as the cost ledger counts it: its tokens, and its cost
    (None when its model has no price: counted as an unpriced call, never as free)."""
    if _instruments is None:
        return
    attributes = {GEN_AI_SYSTEM: system, GEN_AI_REQUEST_MODEL: model}
    for kind, count in (
        ("input", input_tokens),
        ("output", output_tokens),
        ("cached_input", cached_input_tokens),
    ):
        if count:
            _instruments.model_tokens.add(count, {**attributes, GEN_AI_TOKEN_TYPE: kind})
    if cost is None:
        _instruments.unpriced_calls.add(1, attributes)
    elif cost:
        _instruments.model_cost.add(cost, attributes)


def record_tool_call(*, tool: str, outcome: ToolOutcome, seconds: float) -> None:
    """One tool call ended (built-in, MCP or `delegate`-free tool)."""
    if _instruments is not None:
        attributes = {GEN_AI_TOOL_NAME: tool, OUTCOME: outcome}
        _instruments.tool_calls.add(1, attributes)
        _instruments.tool_duration.record(seconds, attributes)


def record_delegation(*, outcome: DelegationOutcome, depth: int, seconds: float) -> None:
    """One delegation ended in its `delegation_response`. `depth` is the target run's depth."""
    if _instruments is not None:
        attributes = {OUTCOME: outcome, DELEGATION_DEPTH: depth}
        _instruments.delegations.add(1, attributes)
        _instruments.delegation_duration.record(seconds, attributes)


def observe_agent_cache(source: Callable[[], AgentCacheStats]) -> Callable[[], None]:
    """Reports an agent cache's size, hits, misses and evictions at every scrape. `source` is
    called from the scrape thread: it must only read counters the cache already keeps. Returns
    the function that unregisters it (call it when the executor stops)."""
    return _register(_cache_sources, source)


def observe_active_runs(source: Callable[[], int]) -> Callable[[], None]:
    """Reports the runs in flight at every scrape; same contract as `observe_agent_cache`."""
    return _register(_active_run_sources, source)


def observe_event_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Reports the unfinished tasks of `loop` at every scrape. A process that serves several
    services on one loop (`agentmesh up`) registers it once per service and is counted once."""
    with _sources_lock:
        _event_loops.add(loop)


# --- recorded by the memory service -------------------------------------------------------------


def record_memory_append(*, seconds: float, events: int, outcome: AppendOutcome = "ok") -> None:
    """One append commit: its latency and how many events it stored (with group commit, the
    events of every request it carried)."""
    if _instruments is not None:
        _instruments.memory_append_duration.record(seconds, {OUTCOME: outcome})
        _instruments.memory_append_batch_size.record(events, {OUTCOME: outcome})


# --- observable callbacks -----------------------------------------------------------------------


def _register(sources: list, source: Callable) -> Callable[[], None]:
    with _sources_lock:
        sources.append(source)

    def unregister() -> None:
        with _sources_lock:
            if source in sources:
                sources.remove(source)

    return unregister


def _snapshot(sources: list) -> list:
    with _sources_lock:
        return list(sources)


def _observe_cache(options: CallbackOptions, field: str) -> Iterable[Observation]:
    sources = _snapshot(_cache_sources)
    if not sources:
        return []
    total = 0
    for source in sources:
        try:
            total += getattr(source(), field)
        except Exception:  # a failing source must not break the scrape
            logger.exception("agent cache metrics source failed")
    return [Observation(total)]


def _observe_asyncio_tasks(options: CallbackOptions) -> Iterable[Observation]:
    with _sources_lock:
        loops = [loop for loop in _event_loops if not loop.is_closed()]
    if not loops:
        return []
    # From the scrape thread: `all_tasks` copies the loop's task set, retrying if it changes meanwhile.
    return [Observation(sum(len(asyncio.all_tasks(loop)) for loop in loops))]


def _observe_active_runs(options: CallbackOptions) -> Iterable[Observation]:
    sources = _snapshot(_active_run_sources)
    if not sources:
        return []
    total = 0
    for source in sources:
        try:
            total += source()
        except Exception:
            logger.exception("active runs metrics source failed")
    return [Observation(total)]
