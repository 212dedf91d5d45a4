"""Executor-local span helpers and names, beside the shared ones in `agentmesh.runtime.telemetry`
(`run {agent}`, `step {n}`, `chat {model}`, `execute_tool {tool}`, `delegate {agent}`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace

from agentmesh.runtime import telemetry

SUB_AGENT = "agentmesh.sub_agent"


@contextmanager
def sub_agent_span(*, agent: str, depth: int) -> Iterator[trace.Span]:
    """The span of a workflow agent running one sub-agent (`sub_agent {agent}`), parent of the
    gRPC call to the sub-agent's executor."""
    attributes = {SUB_AGENT: agent, telemetry.DELEGATION_DEPTH: depth}
    with telemetry.tracer().start_as_current_span(f"sub_agent {agent}", attributes=attributes) as span:
        try:
            yield span
        except (asyncio.CancelledError, GeneratorExit):
            telemetry.mark_cancelled(span)
            raise
