"""W3C trace context over HTTP: the gateway's FastAPI app (FastAPI's native OpenTelemetry
support, on with the process's tracer and meter providers) continues the caller's `traceparent`
in a SERVER span, and the gRPC calls a handler makes carry that trace on to the next service.
Nothing from the Authorization header is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.trace import SpanKind

from agentmesh.runtime.interceptors import client_interceptors
from agentmesh.runtime.server import ServiceBinding, start_server
from tests.integration.observability.conftest import metric_points

TRACE_ID = "4bf92f3577b34da6a3ce929b0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
SECRET = "canary-bearer-token-0123456789"
CHECK = "agentmesh.test.v1.PeerService/Check"


@pytest.fixture
async def peer() -> AsyncIterator[grpc.aio.Channel]:
    """A gRPC service behind the HTTP app, reached through the shared client interceptors."""

    async def check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"SERVING"

    handler = grpc.method_handlers_generic_handler(
        "agentmesh.test.v1.PeerService", {"Check": grpc.unary_unary_rpc_method_handler(check)}
    )
    server = await start_server(
        [ServiceBinding("agentmesh.test.v1.PeerService", lambda s: s.add_generic_rpc_handlers((handler,)))]
    )
    channel = grpc.aio.insecure_channel(server.address, interceptors=client_interceptors())
    yield channel
    await channel.close()
    await server.stop(0)


def _app(channel: grpc.aio.Channel) -> FastAPI:
    app = FastAPI()

    @app.get("/api/v1/projects/{project_id}/ready")
    async def ready(project_id: str) -> dict[str, str]:
        reply = await channel.unary_unary(f"/{CHECK}")(b"")
        return {"project": project_id, "status": reply.decode()}

    return app


async def test_an_http_request_and_the_grpc_calls_it_makes_are_one_trace(spans, metric_reader, peer) -> None:
    transport = httpx.ASGITransport(app=_app(peer))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        response = await http.get(
            "/api/v1/projects/p-42/ready",
            headers={
                "traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01",
                "authorization": f"Bearer {SECRET}",
            },
        )

    assert response.json() == {"project": "p-42", "status": "SERVING"}
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    http_server = next(s for s in finished if s.kind is SpanKind.SERVER and s.name.startswith("GET"))
    grpc_server = next(s for s in finished if s.kind is SpanKind.SERVER and s.name == CHECK)
    assert http_server.name == "GET /api/v1/projects/{project_id}/ready"
    assert format(http_server.parent.span_id, "016x") == PARENT_SPAN_ID
    assert {format(s.context.trace_id, "032x") for s in finished} == {TRACE_ID}
    # Walk up from the gRPC server span: its CLIENT span, then on up to the HTTP server span.
    ancestor = by_id[grpc_server.parent.span_id]
    assert (ancestor.kind, ancestor.name) == (SpanKind.CLIENT, CHECK)
    while ancestor is not http_server:
        assert ancestor.parent is not None and ancestor.parent.span_id in by_id, f"orphan {ancestor.name}"
        ancestor = by_id[ancestor.parent.span_id]
    for span in finished:
        assert SECRET not in repr(dict(span.attributes or {})), span.name
    routes = {a.get("http.route") for a, _ in metric_points(metric_reader, "http.server.request.duration")}
    assert "/api/v1/projects/{project_id}/ready" in routes
