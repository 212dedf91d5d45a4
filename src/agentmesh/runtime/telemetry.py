"""OpenTelemetry setup: one tracer provider per process, exporters chosen by the standard
`OTEL_*` variables, and the span and attribute names every service uses.

`OTEL_TRACES_EXPORTER` is `otlp` (OTLP over gRPC to `OTEL_EXPORTER_OTLP_ENDPOINT`), `console` or
`none` (the default). With `none`, no tracer provider is installed and spans cost next to nothing.
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

logger = logging.getLogger(__name__)

TRACER_NAME = "agentmesh"

# Span attribute names, in one place (OpenTelemetry semantic conventions where they exist).
RPC_SYSTEM = "rpc.system"
RPC_SERVICE = "rpc.service"
RPC_METHOD = "rpc.method"
RPC_GRPC_STATUS_CODE = "rpc.grpc.status_code"
AGENT_NAME = "agentmesh.agent"
PROJECT = "agentmesh.project"
SESSION_ID = "agentmesh.session_id"
RUN_ID = "agentmesh.run_id"
DELEGATION_ID = "agentmesh.delegation_id"
DELEGATION_DEPTH = "agentmesh.delegation.depth"
STEP = "agentmesh.step"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def configure_tracing(
    service_name: str, *, processors: list[SpanProcessor] | None = None
) -> TracerProvider | None:
    """Installs the process's tracer provider, once. Returns it (for shutdown), or None when
    tracing is off and no processors were given (tests pass in-memory processors)."""
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    processors = list(processors or [])
    if exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter_name == "console":
        processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name not in ("none", ""):
        logger.warning("unknown OTEL_TRACES_EXPORTER %r; tracing stays off", exporter_name)
    if not processors:
        return None
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource)
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def current_trace_ids() -> tuple[str, str]:
    """The current span's trace id and span id as W3C hex strings, or empty strings."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
