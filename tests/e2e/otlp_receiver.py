"""A test OTLP receiver: a `grpc.aio` server implementing the OpenTelemetry collector's
`TraceService/Export` on a loopback port, keeping every span it is sent, flattened for asserts.

Services under test export to it with the standard variables::

    async with OtlpReceiver() as receiver:
        env = {"OTEL_TRACES_EXPORTER": "otlp", **receiver.exporter_environment()}
        ...
        await receiver.wait_for(lambda spans: any(s.name == "..." for s in spans))

It is a plain grpc.aio server, without the mesh's interceptors, so receiving spans makes none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

_KINDS = {
    trace_pb2.Span.SPAN_KIND_UNSPECIFIED: "UNSPECIFIED",
    trace_pb2.Span.SPAN_KIND_INTERNAL: "INTERNAL",
    trace_pb2.Span.SPAN_KIND_SERVER: "SERVER",
    trace_pb2.Span.SPAN_KIND_CLIENT: "CLIENT",
    trace_pb2.Span.SPAN_KIND_PRODUCER: "PRODUCER",
    trace_pb2.Span.SPAN_KIND_CONSUMER: "CONSUMER",
}
_STATUS = {
    trace_pb2.Status.STATUS_CODE_UNSET: "UNSET",
    trace_pb2.Status.STATUS_CODE_OK: "OK",
    trace_pb2.Status.STATUS_CODE_ERROR: "ERROR",
}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span: ids as W3C hex (`parent_span_id` empty for a root), kind and status as
    names, the exporting service's `service.name`, attributes and events as plain values."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    service: str
    attributes: dict[str, Any]
    status: str
    status_message: str
    start_ns: int
    end_ns: int
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    resource: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """Everything the span carries, as one string (to search for leaked secrets)."""
        return repr((self.name, self.attributes, self.events, self.status_message, self.resource))


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace endpoint on 127.0.0.1 (port 0 picks a free one) that keeps what it gets."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._changed = asyncio.Condition()
        self._server: grpc.aio.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def exporter_environment(self, *, schedule_delay_ms: int = 100) -> dict[str, str]:
        """The standard variables that point a service's OTLP exporter here, exporting batches
        every `schedule_delay_ms` (the default 5 s would only slow tests down)."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_BSP_SCHEDULE_DELAY": str(schedule_delay_ms),
        }

    async def start(self) -> Self:
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"{self.host}:{self.port}")
        await self._server.start()
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
            self._server = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.aio.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = list(flatten(request))
        async with self._changed:
            self.requests += 1
            self.spans.extend(received)
            self._changed.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    async def wait_for(
        self, condition: Callable[[list[ReceivedSpan]], bool], *, timeout: float = 15.0
    ) -> None:
        """Waits until `condition(spans)` holds; TimeoutError (listing what arrived) otherwise."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: condition(self.spans))

        try:
            await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"spans not received within {timeout:g}s; got {len(self.spans)}:\n"
                + "\n".join(f"  {s.service} {s.kind} {s.name}" for s in self.spans)
            ) from None

    def in_trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]


def flatten(request: trace_service_pb2.ExportTraceServiceRequest) -> Iterable[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield ReceivedSpan(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    name=span.name,
                    kind=_KINDS.get(span.kind, str(span.kind)),
                    service=service,
                    attributes=_attributes(span.attributes),
                    status=_STATUS.get(span.status.code, str(span.status.code)),
                    status_message=span.status.message,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    events=tuple((event.name, _attributes(event.attributes)) for event in span.events),
                    resource=resource,
                )


def _attributes(pairs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def span_tree(spans: Iterable[ReceivedSpan]) -> str:
    """The spans as an indented list (`service kind name`), children in start order — for
    assertion messages."""
    spans = sorted(spans, key=lambda s: s.start_ns)
    ids = {s.span_id for s in spans}
    children: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else "", []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(f"{'  ' * depth}{span.service} {span.kind.lower()} {span.name} [{span.status}]")
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)
