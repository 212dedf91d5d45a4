"""gRPC interceptors shared by every service.

Server side, one interceptor per call: continues the caller's W3C trace context in a SERVER span,
remembers the caller's deadline and token for outgoing calls, and turns a `DomainError` into a
rich status (anything else into INTERNAL with a generic message, logged with the trace id).

Client side: starts a CLIENT span, injects the trace context, forwards the caller's token and
shortens the timeout to the caller's remaining deadline — Python gRPC propagates neither deadlines
nor cancellation by itself. It does not wrap the call, so a cancellation reaches the call as is
(the stock OpenTelemetry aio client interceptor swallows it; upstream issue #3271).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentmesh.runtime import telemetry
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import AUTHORIZATION, current_token

logger = logging.getLogger(__name__)

# Monotonic time by which the current server call must finish, when its caller set a deadline.
current_deadline: ContextVar[float | None] = ContextVar("agentmesh_deadline", default=None)

_CANCELLED_CODES = (grpc.StatusCode.CANCELLED,)


def _split_method(full_method: str) -> tuple[str, str]:
    service, _, method = full_method.lstrip("/").partition("/")
    return service, method


def _metadata_getter(metadata: Any) -> dict[str, str]:
    return {key: value for key, value in (metadata or ()) if isinstance(value, str)}


class ServerInterceptor(grpc.aio.ServerInterceptor):
    """Tracing, deadline and token capture, and DomainError → status, for every server call."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        carrier = _metadata_getter(handler_call_details.invocation_metadata)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _wrap_unary(handler.unary_unary, method, carrier),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(handler.unary_stream, method, carrier),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client- and bidi-streaming methods: none in agentmesh's API


def _enter_call(method: str, carrier: dict[str, str], context: grpc.aio.ServicerContext) -> trace.Span:
    remaining = context.time_remaining()
    current_deadline.set(time.monotonic() + remaining if remaining is not None else None)
    authorization = carrier.get(AUTHORIZATION, "")
    current_token.set(authorization.partition(" ")[2] or None)
    service, name = _split_method(method)
    parent = propagate.extract(carrier)
    span = telemetry.tracer().start_span(
        method.lstrip("/"),
        context=parent,
        kind=SpanKind.SERVER,
        attributes={telemetry.RPC_SYSTEM: "grpc", telemetry.RPC_SERVICE: service, telemetry.RPC_METHOD: name},
    )
    return span


async def _fail(span: trace.Span, error: BaseException, context: grpc.aio.ServicerContext) -> None:
    if isinstance(error, DomainError):
        status = error.to_status()
        span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, error.code.value[0])
        if error.code not in _CANCELLED_CODES:
            span.set_status(Status(StatusCode.ERROR, error.reason))
        await context.abort(status.code, status.details, status.trailing_metadata)
    trace_id, _ = telemetry.current_trace_ids()
    logger.exception("unhandled error in %s (trace_id=%s)", span.name, trace_id or "-")
    span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, grpc.StatusCode.INTERNAL.value[0])
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    await context.abort(grpc.StatusCode.INTERNAL, "internal error")


def _finish(span: trace.Span, context: grpc.aio.ServicerContext, cancelled: bool) -> None:
    if cancelled or context.cancelled():
        # A cancelled call is recorded as cancelled, not OK.
        span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, grpc.StatusCode.CANCELLED.value[0])
        span.set_status(Status(StatusCode.ERROR, "CANCELLED"))
    span.end()


def _wrap_unary(behavior: Callable[..., Awaitable[Any]], method: str, carrier: dict[str, str]):
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        span = _enter_call(method, carrier, context)
        token = otel_context.attach(trace.set_span_in_context(span))
        cancelled = False
        try:
            return await behavior(request, context)
        except (grpc.aio.AbortError, grpc.RpcError):
            raise
        except Exception as error:  # every failure leaves as a status
            await _fail(span, error, context)
        except BaseException:
            cancelled = True
            raise
        finally:
            otel_context.detach(token)
            _finish(span, context, cancelled)

    return unary


def _wrap_stream(behavior: Callable[..., AsyncIterator[Any]], method: str, carrier: dict[str, str]):
    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        span = _enter_call(method, carrier, context)
        token = otel_context.attach(trace.set_span_in_context(span))
        cancelled = False
        try:
            async for response in behavior(request, context):
                yield response
        except (grpc.aio.AbortError, grpc.RpcError):
            raise
        except Exception as error:  # every failure leaves as a status
            await _fail(span, error, context)
        except BaseException:
            cancelled = True
            raise
        finally:
            otel_context.detach(token)
            _finish(span, context, cancelled)

    return stream


def _outgoing(details: grpc.aio.ClientCallDetails, span: trace.Span) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    for key, value in carrier.items():
        metadata.add(key, value)
    if AUTHORIZATION not in metadata:
        token = current_token.get()
        if token:
            metadata.add(AUTHORIZATION, f"Bearer {token}")
    timeout = details.timeout
    deadline = current_deadline.get()
    if deadline is not None:
        remaining = max(deadline - time.monotonic(), 0.001)
        timeout = remaining if timeout is None else min(timeout, remaining)
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=timeout,
        metadata=metadata,
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


def _client_span(details: grpc.aio.ClientCallDetails) -> trace.Span:
    method = details.method.decode() if isinstance(details.method, bytes) else details.method
    service, name = _split_method(method)
    return telemetry.tracer().start_span(
        method.lstrip("/"),
        kind=SpanKind.CLIENT,
        attributes={telemetry.RPC_SYSTEM: "grpc", telemetry.RPC_SERVICE: service, telemetry.RPC_METHOD: name},
    )


def _end_when_done(span: trace.Span, call: grpc.aio.Call) -> None:
    def done(finished: grpc.aio.Call) -> None:
        code = finished.code() if not finished.cancelled() else grpc.StatusCode.CANCELLED
        span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, code.value[0])
        if code != grpc.StatusCode.OK:
            span.set_status(Status(StatusCode.ERROR, code.name))
        span.end()

    call.add_done_callback(done)


class ClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Trace context, caller token and remaining deadline on every outgoing call."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        span = _client_span(client_call_details)
        call = await continuation(_outgoing(client_call_details, span), request)
        _end_when_done(span, call)
        return call

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        span = _client_span(client_call_details)
        call = await continuation(_outgoing(client_call_details, span), request)
        _end_when_done(span, call)
        return call
