"""Fixtures for the observability tests: an in-memory metric reader for the test process, and
small helpers to read what it collected."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from agentmesh.runtime import metrics
from tests.ports import free_loopback_port


@pytest.fixture(scope="session")
def _metrics() -> Iterator[tuple[InMemoryMetricReader, metrics.Metrics]]:
    """The test process's meter provider: an in-memory reader plus a Prometheus endpoint."""
    reader = InMemoryMetricReader()
    handle = metrics.configure_metrics(
        service_name="agentmesh-tests",
        settings=metrics.MetricsSettings(metrics_port=free_loopback_port()),
        readers=[reader],
    )
    assert handle is not None
    yield reader, handle
    metrics.disable_metrics()
    handle.shutdown()


@pytest.fixture
def metric_reader(_metrics) -> InMemoryMetricReader:
    """The process's in-memory metric reader (cumulative: filter points by attributes unique to
    the test, or compare before and after)."""
    return _metrics[0]


@pytest.fixture
def metrics_url(_metrics) -> str:
    """URL of the test process's Prometheus endpoint."""
    return _metrics[1].endpoint.url


def metric_points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    """Every data point of the metric `name` as (attributes, point)."""
    data = reader.get_metrics_data()
    found: list[tuple[dict[str, Any], Any]] = []
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == name:
                    found.extend((dict(point.attributes or {}), point) for point in metric.data.data_points)
    return found
