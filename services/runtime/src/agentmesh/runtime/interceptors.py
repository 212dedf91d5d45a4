"""gRPC interceptors shared by every service.

Server side, one interceptor per call: refuses a request that does not decode (a corrupt wire
format, invalid UTF-8 in a string, nesting past protobuf's depth limit) with INVALID_ARGUMENT
rather than the UNKNOWN grpc answers by itself, and one whose ids or names hold a NUL character
(which no store can keep) naming the field, continues the caller's W3C trace context in a
SERVER span,
remembers the caller's deadline and token for outgoing calls, turns a `DomainError` into a rich
status (anything else into INTERNAL with a generic message, logged with the trace id), and records
the call's duration and status code (`rpc.server.call.duration`). A call the client cancelled is
recorded as CANCELLED — the span with an error status, not OK (stock instrumentation records
cancelled server streams as OK).

Client side (`client_interceptors()`: one object for unary calls and one for server streams, as
grpc.aio needs): starts a CLIENT span, injects the trace context, forwards the caller's token,
shortens the timeout to the caller's remaining deadline — Python gRPC propagates neither deadlines
nor cancellation by itself — and records `rpc.client.call.duration` when the call ends. It does not
wrap the call, so a cancellation reaches the call as is (the stock OpenTelemetry aio client
interceptor swallows it: open-telemetry/opentelemetry-python-contrib#3271).

Health checks get no spans (they are still counted). Kept cheap: no per-message spans or events,
metadata never copied into attributes (it carries the bearer token), each method's handler wrapped
once, and with tracing and metrics off a call costs a non-recording span and two `None` checks.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

import grpc
from google.protobuf.message import Message
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentmesh.runtime import metrics, telemetry
from agentmesh.runtime.database_errors import database_unavailable
from agentmesh.runtime.errors import DomainError, MalformedRequest, ValidationFailed, peer_service
from agentmesh.runtime.handlers import HandlerWrappingInterceptor
from agentmesh.runtime.identity import AUTHORIZATION, current_token, outgoing_token
from agentmesh.runtime.limits import nul_field

logger = logging.getLogger(__name__)

# Services whose calls get no span (they are still counted in the RPC metrics): health checks run
# every few seconds from every balancer and gateway, and would bury the traces worth reading.
UNTRACED_SERVICES = frozenset({"grpc.health.v1.Health"})

# Monotonic time by which the current server call must finish, when its caller set a deadline.
current_deadline: ContextVar[float | None] = ContextVar("agentmesh_deadline", default=None)


def _split_method(full_method: str) -> tuple[str, str]:
    service, _, method = full_method.lstrip("/").partition("/")
    return service, method


def _metadata_getter(metadata: Any) -> dict[str, str]:
    return {key: value for key, value in (metadata or ()) if isinstance(value, str)}


class ServerInterceptor(HandlerWrappingInterceptor):
    """Tracing, metrics, deadline and token capture, and DomainError → status, for every call.

    The wrapper reads the call's metadata from its context, so nothing is built per call but the
    span. It keeps the tasks of the calls in flight (`in_flight`): a stopping server waits for
    them, so that none is still unwinding — returning a database connection, say — once the
    service closed what they use."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: set[asyncio.Task[Any]] = set()

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        return _wrap_handler(handler, _Method(method), self.in_flight)


class _Method:
    """What every call of one method shares: its span name and its service and method names."""

    __slots__ = ("method", "service", "span_name")

    def __init__(self, full_method: str) -> None:
        self.span_name = full_method.lstrip("/")
        self.service, self.method = _split_method(full_method)


class _Undecodable:
    """What the wrapped deserializer hands on for bytes that do not decode: grpc would end the
    call with UNKNOWN on its own, so the behaviour refuses it, as any bad input, with its own
    status."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Unstorable:
    """What the wrapped deserializer hands on for a request naming text with a NUL character
    (`limits.nul_field`): refused naming the field before any service looks it up, since
    PostgreSQL would fail the query that did."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field


def _decoding(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def decode(raw: bytes) -> Any:
        try:
            request = deserializer(raw)
        except Exception as error:  # DecodeError, and whatever a custom deserializer raises
            return _Undecodable(error)
        # No NUL byte in the wire format, no NUL character in any text: the walk is for the rest.
        if b"\x00" in raw and isinstance(request, Message) and (field := nul_field(request)):
            return _Unstorable(field)
        return request

    return decode


def _check_decoded(request: Any, method: _Method) -> None:
    if isinstance(request, _Undecodable):
        raise MalformedRequest(
            f"the request is not a valid {method.method} request message: {request.error}",
            metadata={"method": method.span_name},
        )
    if isinstance(request, _Unstorable):
        raise ValidationFailed.field(request.field, "must not contain NUL characters")


def _wrap_handler(
    handler: grpc.RpcMethodHandler, method: _Method, in_flight: set[asyncio.Task[Any]]
) -> grpc.RpcMethodHandler:
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            _wrap_unary(handler.unary_unary, method, in_flight),
            request_deserializer=_decoding(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        # As grpc.aio decides: a coroutine function writes its responses with `context.write`
        # (the health service's Watch) and must stay one; anything else returns an async
        # iterator of responses (an async generator, usually) and is iterated.
        wrap = _wrap_unary if inspect.iscoroutinefunction(handler.unary_stream) else _wrap_stream
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream, method, in_flight),
            request_deserializer=_decoding(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    return handler  # client- and bidi-streaming methods (reflection): not in agentmesh's API


class _ServerCall:
    """One served call's span and bookkeeping."""

    __slots__ = ("method", "span", "started")

    def __init__(self, span: trace.Span, method: _Method) -> None:
        self.span = span
        self.method = method
        self.started = time.perf_counter()


def _enter_call(method: _Method, context: grpc.aio.ServicerContext) -> _ServerCall:
    carrier = _metadata_getter(context.invocation_metadata())
    remaining = context.time_remaining()
    current_deadline.set(time.monotonic() + remaining if remaining is not None else None)
    authorization = carrier.get(AUTHORIZATION, "")
    current_token.set(authorization.partition(" ")[2] or None)
    parent = propagate.extract(carrier)
    if method.service in UNTRACED_SERVICES:
        return _ServerCall(trace.NonRecordingSpan(trace.get_current_span(parent).get_span_context()), method)
    span = telemetry.tracer().start_span(
        method.span_name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={
            telemetry.RPC_SYSTEM: "grpc",
            telemetry.RPC_SERVICE: method.service,
            telemetry.RPC_METHOD: method.method,
        },
    )
    return _ServerCall(span, method)


async def _fail(call: _ServerCall, error: Exception, context: grpc.aio.ServicerContext) -> None:
    """Leaves through `context.abort` (which raises): a DomainError as its rich status, anything
    else as INTERNAL with a generic message."""
    if isinstance(error, DomainError):
        call.span.set_status(Status(StatusCode.ERROR, error.reason))
        status = error.to_status()
        await context.abort(status.code, status.details, status.trailing_metadata)
    # The method's name, not the span's: with tracing off (the default) the span is a
    # NonRecordingSpan, which has no name, and reading one would replace the real error.
    trace_id, _ = telemetry.current_trace_ids()
    logger.error(
        "unhandled error in %s (trace_id=%s)", call.method.span_name, trace_id or "-", exc_info=error
    )
    call.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    await context.abort(grpc.StatusCode.INTERNAL, "internal error")


def _known(error: Exception, method: _Method) -> Exception:
    """`error`, or the UNAVAILABLE it stands for when the service's database is away."""
    if isinstance(error, DomainError):
        return error
    unavailable = database_unavailable(error, peer_service(f"/{method.service}/{method.method}"))
    if unavailable is None:
        return error
    logger.warning("%s failed: %s (%s)", method.span_name, unavailable, type(error).__name__)
    return unavailable


def _failure_code(error: Exception) -> grpc.StatusCode:
    return error.code if isinstance(error, DomainError) else grpc.StatusCode.INTERNAL


def _context_code(context: grpc.aio.ServicerContext, default: grpc.StatusCode) -> grpc.StatusCode:
    """The code the handler set (`set_code`, `abort`), else `default`."""
    try:
        code = context.code()
    except (AttributeError, NotImplementedError):
        return default
    return code if isinstance(code, grpc.StatusCode) else default


def _finish(call: _ServerCall, context: grpc.aio.ServicerContext, code: grpc.StatusCode) -> None:
    if code is not grpc.StatusCode.CANCELLED and context.cancelled():
        code = grpc.StatusCode.CANCELLED
    span = call.span
    span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, code.value[0])
    if code is grpc.StatusCode.CANCELLED:
        telemetry.mark_cancelled(span)
    elif code is not grpc.StatusCode.OK and span.is_recording():
        span.set_status(Status(StatusCode.ERROR, code.name))
    metrics.record_rpc_server_call(
        service=call.method.service,
        method=call.method.method,
        code=code.name,
        seconds=time.perf_counter() - call.started,
    )
    span.end()


def _wrap_unary(behavior: Callable[..., Awaitable[Any]], method: _Method, in_flight: set[asyncio.Task[Any]]):
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        task = _track(in_flight)
        call = _enter_call(method, context)
        token = otel_context.attach(trace.set_span_in_context(call.span))
        code = grpc.StatusCode.OK
        try:
            _check_decoded(request, method)
            response = await behavior(request, context)
            code = _context_code(context, grpc.StatusCode.OK)
            return response
        except (grpc.aio.AbortError, grpc.RpcError):
            code = _context_code(context, grpc.StatusCode.UNKNOWN)
            raise
        except Exception as raised:  # every failure leaves as a status
            error = _known(raised, method)
            code = _failure_code(error)
            await _fail(call, error, context)
        except BaseException:
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            otel_context.detach(token)
            _finish(call, context, code)
            in_flight.discard(task)

    return unary


def _wrap_stream(
    behavior: Callable[..., AsyncIterator[Any]], method: _Method, in_flight: set[asyncio.Task[Any]]
):
    """The span is current while the behaviour runs and while a failure is handled, not across
    the `yield`: a stream that grpc abandons while it waits at the yield (its client went away)
    is closed later by the event loop's finalizer, in another Context, where a token attached in
    this one cannot be detached."""

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        task = _track(in_flight)
        call = _enter_call(method, context)
        in_span = trace.set_span_in_context(call.span)
        responses: AsyncIterator[Any] | None = None
        code = grpc.StatusCode.OK
        try:
            _check_decoded(request, method)
            responses = aiter(behavior(request, context))
            while True:
                with _current(in_span):
                    try:
                        response = await anext(responses)
                    except StopAsyncIteration:
                        break
                yield response
            code = _context_code(context, grpc.StatusCode.OK)
        except (grpc.aio.AbortError, grpc.RpcError):
            code = _context_code(context, grpc.StatusCode.UNKNOWN)
            raise
        except Exception as raised:  # every failure leaves as a status
            with _current(in_span):
                error = _known(raised, method)
                code = _failure_code(error)
                await _fail(call, error, context)
        except BaseException:  # CancelledError, or GeneratorExit when the stream is closed
            code = grpc.StatusCode.CANCELLED
            raise
        finally:
            close = getattr(responses, "aclose", None)
            if close is not None:  # now, under the span, not whenever the collector finds it
                with _current(in_span):
                    await close()
            _finish(call, context, code)
            in_flight.discard(task)

    return stream


def _track(in_flight: set[asyncio.Task[Any]]) -> asyncio.Task[Any]:
    task = cast("asyncio.Task[Any]", asyncio.current_task())  # a handler runs in its call's task
    in_flight.add(task)
    return task


@contextmanager
def _current(context: otel_context.Context) -> Iterator[None]:
    """`context` is OpenTelemetry's current one inside the block (attached and detached in the
    same Context: never across a yield of a generator)."""
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def _outgoing(details: grpc.aio.ClientCallDetails, span: trace.Span) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    for key, value in carrier.items():
        metadata.add(key, value)
    if AUTHORIZATION not in metadata:
        token = outgoing_token()
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


def _client_span(details: grpc.aio.ClientCallDetails) -> tuple[trace.Span, str, str]:
    full_method = details.method.decode() if isinstance(details.method, bytes) else details.method
    service, method = _split_method(full_method)
    if service in UNTRACED_SERVICES:
        return trace.NonRecordingSpan(trace.get_current_span().get_span_context()), service, method
    span = telemetry.tracer().start_span(
        full_method.lstrip("/"),
        kind=SpanKind.CLIENT,
        attributes={
            telemetry.RPC_SYSTEM: "grpc",
            telemetry.RPC_SERVICE: service,
            telemetry.RPC_METHOD: method,
        },
    )
    return span, service, method


def _end_when_done(span: trace.Span, call: grpc.aio.Call, service: str, method: str, started: float) -> None:
    def end(code: grpc.StatusCode) -> None:
        span.set_attribute(telemetry.RPC_GRPC_STATUS_CODE, code.value[0])
        if code is grpc.StatusCode.CANCELLED:
            telemetry.mark_cancelled(span)
        elif code is not grpc.StatusCode.OK:
            span.set_status(Status(StatusCode.ERROR, code.name))
        metrics.record_rpc_client_call(
            service=service, method=method, code=code.name, seconds=time.perf_counter() - started
        )
        span.end()

    async def end_with_status(finished: grpc.aio.Call) -> None:
        end(await finished.code())  # done already: returns at once

    def done(finished: grpc.aio.Call) -> None:
        if finished.cancelled():
            end(grpc.StatusCode.CANCELLED)
            return
        code = _finished_code(finished)
        if code is not None:
            end(code)
        elif not span.is_recording() and not metrics.enabled():
            span.end()  # nothing would record the code: do not spend a task on reading it
        else:
            task = asyncio.get_running_loop().create_task(end_with_status(finished))
            _pending.add(task)
            task.add_done_callback(_pending.discard)

    call.add_done_callback(done)


# Tasks that read finished calls' codes, kept referenced until they end.
_pending: set[asyncio.Task[None]] = set()
_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _finished_code(call: grpc.aio.Call) -> grpc.StatusCode | None:
    """A finished call's status code, read without a coroutine, or None when it cannot be.

    grpc.aio offers the code only as `await call.code()`; a task per call to await it costs more
    than the rest of this interceptor. The Cython call object holds the received status once the
    call is done, so it is read from there (grpcio is pinned); if that ever moves, the caller
    falls back to the coroutine."""
    try:
        return _STATUS_CODES.get(call._cython_call._status.code())  # type: ignore[attr-defined]
    except AttributeError:
        return None


class _ClientTelemetry:
    """What every outgoing call gets: a CLIENT span, trace context, the caller's token and
    remaining deadline, and its duration and code recorded when it ends."""

    async def _intercept(self, continuation, client_call_details, request):
        started = time.perf_counter()
        span, service, method = _client_span(client_call_details)
        try:
            call = await continuation(_outgoing(client_call_details, span), request)
        except BaseException:
            span.end()
            raise
        _end_when_done(span, call, service, method, started)
        return call


class UnaryClientInterceptor(_ClientTelemetry, grpc.aio.UnaryUnaryClientInterceptor):
    """Client telemetry for unary calls."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await self._intercept(continuation, client_call_details, request)


class StreamClientInterceptor(_ClientTelemetry, grpc.aio.UnaryStreamClientInterceptor):
    """Client telemetry for server-streaming calls."""

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await self._intercept(continuation, client_call_details, request)


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """The interceptors for a channel to a peer service. Two objects, because grpc.aio files an
    interceptor under the FIRST client-interceptor interface it implements only: one object
    implementing both would never see a streaming call (no span, no trace context, no token and
    no deadline on `Run` or `WatchEvents`)."""
    return [UnaryClientInterceptor(), StreamClientInterceptor()]
