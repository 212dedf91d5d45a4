"""The metrics API the services record through, and the Prometheus endpoint that serves it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx
import pytest

from agentmesh.runtime import metrics
from tests.integration.observability.conftest import metric_points


@dataclass
class CacheStats:
    size: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0


def _scrape(url: str) -> dict[str, float]:
    """The endpoint's samples as {'name{labels}': value}, comments left out."""
    response = httpx.get(url, timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[str, float] = {}
    for line in response.text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _value(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for sample, value in samples.items():
        metric, _, rest = sample.partition("{")
        if metric == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


def test_the_port_comes_from_the_services_own_variable_before_the_shared_one(monkeypatch) -> None:
    monkeypatch.delenv("AGENTMESH_METRICS_PORT", raising=False)
    assert metrics.metrics_settings("memory").metrics_port == 0, "off by default"

    monkeypatch.setenv("AGENTMESH_METRICS_PORT", "9464")
    monkeypatch.setenv("AGENTMESH_EXECUTOR_METRICS_PORT", "9465")
    monkeypatch.setenv("AGENTMESH_EXECUTOR_METRICS_HOST", "0.0.0.0")

    executor, memory = metrics.metrics_settings("executor"), metrics.metrics_settings("memory")
    assert (executor.metrics_port, executor.metrics_host) == (9465, "0.0.0.0")
    assert (memory.metrics_port, memory.metrics_host) == (9464, "127.0.0.1")
    assert metrics.metrics_settings().metrics_port == 9464


def test_a_bad_port_is_refused_at_start(monkeypatch) -> None:
    monkeypatch.setenv("AGENTMESH_REGISTRY_METRICS_PORT", "70000")
    with pytest.raises(ValueError, match="metrics_port"):
        metrics.metrics_settings("registry")


def test_metrics_stay_off_without_a_port_or_a_reader() -> None:
    assert metrics.configure_metrics("gateway", settings=metrics.MetricsSettings(metrics_port=0)) is None


def test_what_the_executor_and_memory_record_is_served_to_prometheus(metrics_url, metric_reader) -> None:
    metrics.record_run(kind="sequential", outcome="max_steps", seconds=1.5, delegated=True)
    metrics.record_step(kind="sequential")
    metrics.record_model_call(
        system="mock", model="mock/metrics-test", seconds=0.2, input_tokens=7, output_tokens=3
    )
    metrics.record_model_call(system="mock", model="mock/metrics-test", seconds=0.1, error_type="timeout")
    metrics.record_tool_call(tool="metrics_test_tool", outcome="timeout", seconds=30.0)
    metrics.record_delegation(outcome="refused", depth=4, seconds=0.01)
    metrics.record_memory_append(seconds=0.003, events=17)

    samples = _scrape(metrics_url)

    assert (
        _value(samples, "agentmesh_runs_total", agentmesh_agent_kind="sequential", outcome="max_steps") >= 1
    )
    assert _value(samples, "agentmesh_run_duration_seconds_count", agentmesh_delegated="true") >= 1
    assert _value(samples, "agentmesh_steps_total", agentmesh_agent_kind="sequential") >= 1
    model = {"gen_ai_request_model": "mock/metrics-test"}
    assert _value(samples, "agentmesh_model_calls_total", **model) == 2
    assert _value(samples, "agentmesh_model_calls_total", error_type="timeout", **model) == 1
    assert _value(samples, "gen_ai_client_operation_duration_seconds_count", **model) == 2
    assert _value(samples, "gen_ai_client_token_usage_sum", gen_ai_token_type="input", **model) == 7
    assert _value(samples, "gen_ai_client_token_usage_sum", gen_ai_token_type="output", **model) == 3
    assert (
        _value(samples, "agentmesh_tool_calls_total", gen_ai_tool_name="metrics_test_tool", outcome="timeout")
        == 1
    )
    assert (
        _value(samples, "agentmesh_tool_duration_seconds_sum", gen_ai_tool_name="metrics_test_tool") == 30.0
    )
    assert (
        _value(samples, "agentmesh_delegations_total", outcome="refused", agentmesh_delegation_depth="4") >= 1
    )
    assert _value(samples, "agentmesh_delegation_duration_seconds_count", outcome="refused") >= 1
    assert _value(samples, "agentmesh_memory_append_duration_seconds_count", outcome="ok") >= 1
    assert _value(samples, "agentmesh_memory_append_batch_size_sum") >= 17
    assert _value(samples, "process_resident_memory_bytes") > 0
    # The same data through the OpenTelemetry API (what an OTLP metrics exporter would see).
    assert any(
        a.get("gen_ai.tool.name") == "metrics_test_tool"
        for a, _ in metric_points(metric_reader, "agentmesh.tool.calls")
    )


def test_the_agent_cache_and_active_runs_are_read_at_scrape_time(metrics_url) -> None:
    first, second = CacheStats(size=3, hits=10, misses=2, evictions=1), CacheStats(size=1, hits=5)
    stop_first = metrics.observe_agent_cache(lambda: first)
    stop_second = metrics.observe_agent_cache(lambda: second)
    stop_runs = metrics.observe_active_runs(lambda: 4)
    try:
        samples = _scrape(metrics_url)
        assert _value(samples, "agentmesh_agent_cache_size") == 4
        assert _value(samples, "agentmesh_agent_cache_hits_total") == 15
        assert _value(samples, "agentmesh_agent_cache_misses_total") == 2
        assert _value(samples, "agentmesh_agent_cache_evictions_total") == 1
        assert _value(samples, "agentmesh_runs_active") == 4

        first.hits += 5
        second.size = 0
        samples = _scrape(metrics_url)
        assert _value(samples, "agentmesh_agent_cache_hits_total") == 20
        assert _value(samples, "agentmesh_agent_cache_size") == 3
    finally:
        stop_first()
        stop_second()
        stop_runs()


def test_a_failing_cache_source_does_not_break_the_scrape(metrics_url) -> None:
    def broken() -> CacheStats:
        raise RuntimeError("cache gone")

    stop = metrics.observe_agent_cache(broken)
    try:
        samples = _scrape(metrics_url)
    finally:
        stop()
    assert "agentmesh_agent_cache_size" in {s.partition("{")[0] for s in samples}


async def test_the_event_loops_unfinished_tasks_are_read_at_scrape_time(metrics_url) -> None:
    metrics.observe_event_loop(asyncio.get_running_loop())
    released = asyncio.Event()
    before = _value(await asyncio.to_thread(_scrape, metrics_url), "agentmesh_process_asyncio_tasks")
    waiting = [asyncio.create_task(released.wait()) for _ in range(5)]
    during = _value(await asyncio.to_thread(_scrape, metrics_url), "agentmesh_process_asyncio_tasks")
    released.set()
    await asyncio.gather(*waiting)
    after = _value(await asyncio.to_thread(_scrape, metrics_url), "agentmesh_process_asyncio_tasks")
    assert before >= 1  # this test's own task
    assert (during - before, during - after) == (5, 5)
