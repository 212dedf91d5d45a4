"""The shared interceptors on a real `grpc.aio` server and channel: spans with status codes,
cancelled calls recorded as CANCELLED (not OK), RPC metrics by method and code, and the health
service's write-style Watch stream still served through the interceptor."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.trace import SpanKind, StatusCode

from agentmesh.runtime.errors import NotFound
from agentmesh.runtime.interceptors import client_interceptors
from agentmesh.runtime.server import GrpcServer, ServiceBinding, start_server
from tests.integration.observability.conftest import metric_points

SERVICE = "agentmesh.test.v1.ProbeService"
CANCELLED, NOT_FOUND, INTERNAL, OK = (
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.OK,
)


class Probe:
    """A service whose methods succeed, fail and stream on demand."""

    def __init__(self) -> None:
        self.stream_ended = asyncio.Event()
        self.flood_ended = asyncio.Event()
        self.peer: grpc.aio.Channel | None = None  # a channel back to this server, for relays

    async def relay(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        """Calls Whoami over a streaming call, as a service calls its peers."""
        assert self.peer is not None
        call = self.peer.unary_stream(f"/{SERVICE}/Whoami")(b"")
        return await call.read()

    async def whoami(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        metadata = dict(context.invocation_metadata())
        yield json.dumps(
            {"authorization": metadata.get("authorization", ""), "seconds_left": context.time_remaining()}
        ).encode()

    async def echo(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def missing(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise NotFound("no such probe", reason="PROBE_NOT_FOUND")

    async def broken(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise RuntimeError("secret internals")

    async def ticks(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            for i in range(1000):
                yield b"tick %d" % i
                await asyncio.sleep(0.01)
        finally:
            self.stream_ended.set()

    async def flood(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """Streams without ever waiting itself: between messages it waits only at the yield,
        while grpc sends — where a client going away leaves it."""
        try:
            while True:
                yield b"x" * 1024
        finally:
            self.flood_ended.set()

    def binding(self) -> ServiceBinding:
        handlers = {
            "Echo": grpc.unary_unary_rpc_method_handler(self.echo),
            "Missing": grpc.unary_unary_rpc_method_handler(self.missing),
            "Broken": grpc.unary_unary_rpc_method_handler(self.broken),
            "Ticks": grpc.unary_stream_rpc_method_handler(self.ticks),
            "Flood": grpc.unary_stream_rpc_method_handler(self.flood),
            "Relay": grpc.unary_unary_rpc_method_handler(self.relay),
            "Whoami": grpc.unary_stream_rpc_method_handler(self.whoami),
        }
        generic = grpc.method_handlers_generic_handler(SERVICE, handlers)
        return ServiceBinding(SERVICE, lambda server: server.add_generic_rpc_handlers((generic,)))


@pytest.fixture
async def probe() -> AsyncIterator[tuple[Probe, GrpcServer, grpc.aio.Channel]]:
    service = Probe()
    server = await start_server([service.binding()])
    channel = grpc.aio.insecure_channel(server.address, interceptors=client_interceptors())
    service.peer = grpc.aio.insecure_channel(server.address, interceptors=client_interceptors())
    yield service, server, channel
    await service.peer.close()
    await channel.close()
    await server.stop(0)


def _spans(spans, method: str) -> dict[SpanKind, object]:
    found = {s.kind: s for s in spans.get_finished_spans() if s.name == f"{SERVICE}/{method}"}
    assert set(found) == {SpanKind.CLIENT, SpanKind.SERVER}, found
    return found


def _rpc_count(reader, side: str, method: str, code: grpc.StatusCode) -> int:
    points = metric_points(reader, f"rpc.{side}.call.duration")
    return sum(
        point.count
        for attributes, point in points
        if attributes["rpc.service"] == SERVICE
        and attributes["rpc.method"] == method
        and attributes["rpc.response.status_code"] == code.name
    )


async def _settle(predicate, timeout: float = 5.0) -> None:
    """Waits until `predicate()` holds: span ends run in done-callbacks after the call returns."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_a_successful_call_is_one_client_and_one_server_span_with_code_ok(
    spans, metric_reader, probe
) -> None:
    _, _, channel = probe
    before = _rpc_count(metric_reader, "server", "Echo", OK)

    assert await channel.unary_unary(f"/{SERVICE}/Echo")(b"hi") == b"hi"

    await _settle(lambda: len([s for s in spans.get_finished_spans() if s.name.endswith("/Echo")]) == 2)
    found = _spans(spans, "Echo")
    server, client = found[SpanKind.SERVER], found[SpanKind.CLIENT]
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert server.context.trace_id == client.context.trace_id
    for span in (server, client):
        assert span.attributes["rpc.grpc.status_code"] == 0
        assert span.attributes["rpc.method"] == "Echo"
        assert span.status.status_code is not StatusCode.ERROR
    assert _rpc_count(metric_reader, "server", "Echo", OK) == before + 1
    assert _rpc_count(metric_reader, "client", "Echo", OK) >= 1


async def test_a_domain_error_is_recorded_with_its_code(spans, metric_reader, probe) -> None:
    _, _, channel = probe
    before = _rpc_count(metric_reader, "server", "Missing", NOT_FOUND)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await channel.unary_unary(f"/{SERVICE}/Missing")(b"x")

    assert raised.value.code() is NOT_FOUND
    await _settle(lambda: len([s for s in spans.get_finished_spans() if s.name.endswith("/Missing")]) == 2)
    for span in _spans(spans, "Missing").values():
        assert span.attributes["rpc.grpc.status_code"] == NOT_FOUND.value[0]
        assert span.status.status_code is StatusCode.ERROR
    assert _rpc_count(metric_reader, "server", "Missing", NOT_FOUND) == before + 1
    assert _rpc_count(metric_reader, "client", "Missing", NOT_FOUND) >= 1


async def test_an_unexpected_error_is_internal_without_its_message(spans, metric_reader, probe) -> None:
    _, _, channel = probe

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await channel.unary_unary(f"/{SERVICE}/Broken")(b"x")

    assert raised.value.code() is INTERNAL
    assert "secret internals" not in (raised.value.details() or "")
    await _settle(lambda: len([s for s in spans.get_finished_spans() if s.name.endswith("/Broken")]) == 2)
    server = _spans(spans, "Broken")[SpanKind.SERVER]
    assert server.attributes["rpc.grpc.status_code"] == INTERNAL.value[0]
    assert "secret internals" not in (server.status.description or "")
    assert _rpc_count(metric_reader, "server", "Broken", INTERNAL) >= 1


async def test_a_cancelled_stream_is_recorded_as_cancelled_on_both_sides(spans, metric_reader, probe) -> None:
    service, _, channel = probe
    before = _rpc_count(metric_reader, "server", "Ticks", CANCELLED)

    call = channel.unary_stream(f"/{SERVICE}/Ticks")(b"")
    assert await call.read() == b"tick 0"
    call.cancel()
    await asyncio.wait_for(service.stream_ended.wait(), 5)

    await _settle(lambda: len([s for s in spans.get_finished_spans() if s.name.endswith("/Ticks")]) == 2)
    for span in _spans(spans, "Ticks").values():
        assert span.attributes["rpc.grpc.status_code"] == CANCELLED.value[0], span.kind
        assert span.status.status_code is StatusCode.ERROR, span.kind
        assert span.attributes["error.type"] == "cancelled"
    await _settle(lambda: _rpc_count(metric_reader, "server", "Ticks", CANCELLED) == before + 1)
    assert _rpc_count(metric_reader, "client", "Ticks", CANCELLED) >= 1


async def test_a_stream_left_at_its_yield_by_its_client_closes_cleanly(
    spans, metric_reader, probe, caplog
) -> None:
    """grpc abandons a server stream whose client went away while it sends; the stream is closed
    later, in another Context. Its span must not be attached across the yield: detaching it there
    fails, and OpenTelemetry logs a traceback ("Failed to detach context") at every such close."""
    service, _, channel = probe
    before = _rpc_count(metric_reader, "server", "Flood", CANCELLED)

    call = channel.unary_stream(f"/{SERVICE}/Flood")(b"")
    assert await call.read() == b"x" * 1024
    call.cancel()

    await asyncio.wait_for(service.flood_ended.wait(), 5)
    await _settle(lambda: _rpc_count(metric_reader, "server", "Flood", CANCELLED) == before + 1)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    server = _spans(spans, "Flood")[SpanKind.SERVER]
    assert server.attributes["rpc.grpc.status_code"] == CANCELLED.value[0]


async def test_health_checks_are_served_and_counted_but_not_traced(spans, metric_reader, probe) -> None:
    _, _, channel = probe
    health = "grpc.health.v1.Health"
    before = sum(
        p.count
        for a, p in metric_points(metric_reader, "rpc.server.call.duration")
        if a["rpc.service"] == health and a["rpc.response.status_code"] == "CANCELLED"
    )
    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))

    first = await watch.read()  # a write-style stream handler, still served through the interceptor
    watch.cancel()

    assert first.status == health_pb2.HealthCheckResponse.SERVING

    def cancelled_watches() -> int:
        return sum(
            p.count
            for a, p in metric_points(metric_reader, "rpc.server.call.duration")
            if a["rpc.service"] == health
            and a["rpc.method"] == "Watch"
            and a["rpc.response.status_code"] == "CANCELLED"
        )

    await _settle(lambda: cancelled_watches() == before + 1)
    assert not [s for s in spans.get_finished_spans() if s.name.startswith(health)]


async def test_a_streaming_call_to_a_peer_carries_the_trace_token_and_remaining_deadline(
    spans, probe
) -> None:
    _, _, channel = probe

    reply = await channel.unary_unary(f"/{SERVICE}/Relay")(
        b"", metadata=(("authorization", "Bearer caller-token"),), timeout=30
    )

    seen = json.loads(reply)
    assert seen["authorization"] == "Bearer caller-token"
    # The peer's deadline is the caller's, not a new one: gRPC reads its clock coarsely (a cached
    # "now" on a busy host put it ~0.1 s past 30 once), so allow a second, not sub-second margins.
    assert seen["seconds_left"] is not None and 0 < seen["seconds_left"] <= 31
    await _settle(lambda: len([s for s in spans.get_finished_spans() if s.name.endswith("/Whoami")]) == 2)
    finished = {(s.kind, s.name.rpartition("/")[2]): s for s in spans.get_finished_spans()}
    relay, whoami_client = finished[SpanKind.SERVER, "Relay"], finished[SpanKind.CLIENT, "Whoami"]
    whoami = finished[SpanKind.SERVER, "Whoami"]
    assert whoami_client.parent.span_id == relay.context.span_id
    assert whoami.parent.span_id == whoami_client.context.span_id
