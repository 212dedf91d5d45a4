"""OpenTelemetry tracing: one tracer provider per process, exporters chosen by the standard
`OTEL_*` variables, the span and attribute names every service uses, and the span helpers for an
agent's run, its steps, model calls, tool calls and delegations.

`OTEL_TRACES_EXPORTER` is `otlp` (OTLP over gRPC to `OTEL_EXPORTER_OTLP_ENDPOINT`), `console` or
`none` (the default). With `none`, spans are not recorded — a sampler that drops everything — yet
trace and span ids are still made and propagated, so logs and events correlate at the cost of an
id per span. Spans leave through a `BatchSpanProcessor` (tuned by the standard `OTEL_BSP_*`
variables), so exporting never sits on a request's path; `OTEL_TRACES_SAMPLER` samples.

Message content (prompts, answers, tool arguments and results) is not recorded on spans unless
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, as the GenAI semantic conventions
advise; `set_content` is the one way to record it. Secrets (API keys, tokens, passwords) are never
recorded, whatever that variable says.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

logger = logging.getLogger(__name__)

TRACER_NAME = "agentmesh"
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# Span attribute names, in one place (OpenTelemetry semantic conventions where they exist).
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code"
ERROR_TYPE = "error.type"
AGENT_NAME = "agentmesh.agent"
AGENT_KIND = "agentmesh.agent.kind"
PROJECT = "agentmesh.project"
SESSION_ID = "agentmesh.session_id"
RUN_ID = "agentmesh.run_id"
RUN_OUTCOME = "agentmesh.run.outcome"
RUN_COUNT = "agentmesh.runs"
FINISH_RUNS_SPAN = "finish runs"
DELEGATION_ID = "agentmesh.delegation_id"
DELEGATION_DEPTH = "agentmesh.delegation.depth"
DELEGATION_TARGET = "agentmesh.delegation.target"
DELEGATION_OUTCOME = "agentmesh.delegation.outcome"
STEP = "agentmesh.step"
TOOL_OUTCOME = "agentmesh.tool.outcome"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
# Content attributes: recorded only through `set_content`, i.e. only when capture is opted in.
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"

# Span names: `run {agent}`, `step {n}`, `chat {model}`, `execute_tool {tool}`, `delegate {agent}`
# (the GenAI conventions name model and tool spans `{operation} {target}`).
OPERATION_INVOKE_AGENT = "invoke_agent"
OPERATION_CHAT = "chat"
OPERATION_EXECUTE_TOOL = "execute_tool"


@functools.cache
def tracer() -> trace.Tracer:
    """agentmesh's tracer. Made on first use, then kept: before a provider is installed the API
    hands out a proxy that follows the provider installed later, and looking the tracer up on
    every span would cost an environment read each time tracing is off."""
    return trace.get_tracer(TRACER_NAME)


def configure_tracing(service_name: str, *, processors: list[SpanProcessor] | None = None) -> TracerProvider:
    """Installs the process's tracer provider, once, and returns it (shut it down at exit).

    Tests pass in-memory processors. With no exporter and no processor, the provider samples
    nothing: spans are neither recorded nor exported, but trace and span ids are still made and
    propagated, so log lines and stored events keep correlating across services."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    processors = list(processors or [])
    if exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter_name == "console":
        processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name not in ("none", ""):
        logger.warning("unknown OTEL_TRACES_EXPORTER %r; tracing stays off", exporter_name)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    # Sampling otherwise follows the standard OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG.
    provider = TracerProvider(resource=resource, sampler=None if processors else ALWAYS_OFF)
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def capture_content() -> bool:
    """Whether message content may be recorded on spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_
    MESSAGE_CONTENT=true`); off by default."""
    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def set_content(span: trace.Span, attribute: str, value: str) -> None:
    """Records message content (prompt, answer, tool arguments or result) on a span, only when
    content capture is opted in. Never pass a secret here."""
    if span.is_recording() and capture_content():
        span.set_attribute(attribute, value)


@contextmanager
def untraced() -> Iterator[None]:
    """Background work under an unsampled parent: its calls add no traces of their own (tasks
    started inside inherit it)."""
    unsampled = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=random.getrandbits(128) or 1,
            span_id=random.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
        )
    )
    token = otel_context.attach(trace.set_span_in_context(unsampled))
    try:
        yield
    finally:
        otel_context.detach(token)


def current_span_context() -> trace.SpanContext | None:
    """The current span's context, when there is a sampled one to link to later."""
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid and context.trace_flags.sampled else None


@contextmanager
def batch_span(
    name: str, linked: Sequence[trace.SpanContext], **attributes: AttributeValue
) -> Iterator[None]:
    """A span for work done on behalf of many requests at once (a batch): the root of a trace of
    its own, linked to the span of every request it serves. Nothing when none of them is traced."""
    if not linked:
        yield
        return
    with tracer().start_as_current_span(
        name,
        context=otel_context.Context(),
        kind=SpanKind.INTERNAL,
        links=[trace.Link(context) for context in linked],
        attributes=attributes,
    ):
        yield


def current_trace_ids() -> tuple[str, str]:
    """The current span's trace id and span id as W3C hex strings, or empty strings."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def mark_cancelled(span: trace.Span) -> None:
    """Records a span as cancelled: an error status, not OK and not unset."""
    span.set_attribute(ERROR_TYPE, "cancelled")
    span.set_status(Status(StatusCode.ERROR, "cancelled"))


@contextmanager
def _active_span(
    name: str, attributes: dict[str, AttributeValue], kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[trace.Span]:
    with tracer().start_as_current_span(name, kind=kind, attributes=attributes) as span:
        try:
            yield span
        except (asyncio.CancelledError, GeneratorExit):
            # The API records only Exception subclasses; a cancelled run (or a stream its consumer
            # closed) would otherwise end looking like a success.
            mark_cancelled(span)
            raise


def run_span(
    *,
    agent: str,
    project: str,
    session_id: str,
    run_id: str,
    kind: str = "llm",
    delegation_id: str = "",
    delegation_depth: int = 0,
):
    """The span of one agent run (`run {agent}`), current while the run goes on."""
    attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION: OPERATION_INVOKE_AGENT,
        GEN_AI_AGENT_NAME: agent,
        AGENT_NAME: agent,
        AGENT_KIND: kind,
        PROJECT: project,
        SESSION_ID: session_id,
        RUN_ID: run_id,
        DELEGATION_DEPTH: delegation_depth,
    }
    if delegation_id:
        attributes[DELEGATION_ID] = delegation_id
    return _active_span(f"run {agent}", attributes)


def step_span(*, step: int, agent: str = ""):
    """The span of one loop step of an LLM run (`step {n}`): model call, then its tool calls."""
    attributes: dict[str, AttributeValue] = {STEP: step}
    if agent:
        attributes[AGENT_NAME] = agent
    return _active_span(f"step {step}", attributes)


def model_span(*, system: str, model: str, step: int = 0):
    """The span of one model call (`chat {model}`), with the GenAI request attributes. Record
    the usage with `record_model_usage`, never one span per streamed chunk."""
    attributes: dict[str, AttributeValue] = {
        GEN_AI_OPERATION: OPERATION_CHAT,
        GEN_AI_SYSTEM: system,
        GEN_AI_REQUEST_MODEL: model,
    }
    if step:
        attributes[STEP] = step
    return _active_span(f"{OPERATION_CHAT} {model}", attributes, SpanKind.CLIENT)


def record_model_usage(
    span: trace.Span,
    *,
    input_tokens: int,
    output_tokens: int,
    response_model: str = "",
    finish_reason: str = "",
) -> None:
    """Sets the GenAI usage attributes of a model call span."""
    if not span.is_recording():
        return
    span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, input_tokens)
    span.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens)
    if response_model:
        span.set_attribute(GEN_AI_RESPONSE_MODEL, response_model)
    if finish_reason:
        span.set_attribute(GEN_AI_RESPONSE_FINISH_REASONS, (finish_reason,))


def tool_span(*, tool: str, call_id: str = ""):
    """The span of one tool call (`execute_tool {tool}`)."""
    attributes: dict[str, AttributeValue] = {GEN_AI_OPERATION: OPERATION_EXECUTE_TOOL, GEN_AI_TOOL_NAME: tool}
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    return _active_span(f"{OPERATION_EXECUTE_TOOL} {tool}", attributes)


def delegation_span(*, target: str, delegation_id: str, depth: int):
    """The span of one delegation (`delegate {agent}`), parent of the gRPC call to the target's
    executor, so the target's run hangs below it in the same trace."""
    attributes: dict[str, AttributeValue] = {
        DELEGATION_TARGET: target,
        DELEGATION_ID: delegation_id,
        DELEGATION_DEPTH: depth,
    }
    return _active_span(f"delegate {target}", attributes)
