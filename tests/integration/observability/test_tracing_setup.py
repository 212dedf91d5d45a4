"""Tracing setup and the span helpers the executor uses: content capture is opt-in, cancelled
work is recorded as cancelled, and with tracing off ids are still made for logs and events."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from agentmesh.runtime import telemetry

PROMPT = "summarise the quarterly numbers"


def test_tracing_off_records_nothing_but_still_makes_ids_for_logs_and_events() -> None:
    script = (
        "import json\n"
        "from agentmesh.runtime.telemetry import configure_tracing, current_trace_ids, tracer\n"
        "provider = configure_tracing('agentmesh-off')\n"
        "with tracer().start_as_current_span('outer') as outer:\n"
        "    with tracer().start_as_current_span('inner') as inner:\n"
        "        ids = current_trace_ids()\n"
        "print(json.dumps({'ids': ids, 'recording': [outer.is_recording(), inner.is_recording()],\n"
        "    'outer_trace': format(outer.get_span_context().trace_id, '032x')}))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "none"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    trace_id, span_id = seen["ids"]
    assert len(trace_id) == 32 and len(span_id) == 16
    assert trace_id == seen["outer_trace"], "one trace, propagated to the child"
    assert seen["recording"] == [False, False]


def test_content_is_recorded_only_when_opted_in(spans, monkeypatch) -> None:
    monkeypatch.delenv(telemetry.CAPTURE_CONTENT_VARIABLE, raising=False)
    with telemetry.model_span(system="mock", model="mock", step=1) as span:
        telemetry.set_content(span, telemetry.GEN_AI_INPUT_MESSAGES, PROMPT)
    monkeypatch.setenv(telemetry.CAPTURE_CONTENT_VARIABLE, "true")
    with telemetry.model_span(system="mock", model="mock", step=2) as span:
        telemetry.set_content(span, telemetry.GEN_AI_INPUT_MESSAGES, PROMPT)

    default, opted_in = spans.get_finished_spans()
    assert telemetry.GEN_AI_INPUT_MESSAGES not in default.attributes
    assert opted_in.attributes[telemetry.GEN_AI_INPUT_MESSAGES] == PROMPT
    assert telemetry.capture_content()


def test_the_helpers_name_spans_and_set_the_genai_attributes(spans) -> None:
    with (
        telemetry.run_span(
            agent="coordinator",
            project="p",
            session_id="s-1",
            run_id="r-1",
            delegation_id="d-1",
            delegation_depth=1,
        ),
        telemetry.step_span(step=1, agent="coordinator"),
    ):
        with telemetry.model_span(system="openai", model="gpt-4o-mini", step=1) as model:
            telemetry.record_model_usage(model, input_tokens=12, output_tokens=5, finish_reason="stop")
        with telemetry.tool_span(tool="lookup", call_id="call-1"):
            pass
        with telemetry.delegation_span(target="worker", delegation_id="d-2", depth=2):
            pass

    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert set(by_name) == {
        "run coordinator",
        "step 1",
        "chat gpt-4o-mini",
        "execute_tool lookup",
        "delegate worker",
    }
    run, step, chat = by_name["run coordinator"], by_name["step 1"], by_name["chat gpt-4o-mini"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "coordinator"
    assert run.attributes["agentmesh.delegation_id"] == "d-1"
    assert step.parent.span_id == run.context.span_id and chat.parent.span_id == step.context.span_id
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes["gen_ai.system"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 5
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert by_name["execute_tool lookup"].attributes["gen_ai.tool.call.id"] == "call-1"
    assert by_name["delegate worker"].attributes["agentmesh.delegation.target"] == "worker"


async def test_a_cancelled_run_is_recorded_as_cancelled_not_ok(spans) -> None:
    started = asyncio.Event()

    async def run() -> None:
        with telemetry.run_span(agent="slow", project="p", session_id="s", run_id="r"):
            started.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(run())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "cancelled"


async def test_a_stream_closed_by_its_consumer_is_recorded_as_cancelled(spans) -> None:
    async def stream():
        with telemetry.run_span(agent="streamer", project="p", session_id="s", run_id="r"):
            for i in range(10):
                yield i

    chunks = stream()
    assert await anext(chunks) == 0
    await chunks.aclose()

    (span,) = spans.get_finished_spans()
    assert span.attributes["error.type"] == "cancelled"
