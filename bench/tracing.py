"""The tracing section: the same chat on a second mesh that exports its spans over OTLP to a sink,
against the untraced mesh; latency, CPU by service and what the sink received.
"""

from __future__ import annotations

import asyncio
import time

from bench import otlp_sink
from bench.cpu import cpu_per_call
from bench.mesh import SERVICES, GrpcChat, Mesh
from bench.plan import Plan
from bench.report import Results, describe_error
from bench.stats import latency_rounds, warm_up
from tests.e2e.harness import ServiceProcess


def exporter_env(sink: ServiceProcess) -> dict[str, str]:
    """OTLP export to the sink. The batch processor keeps its defaults (5 s schedule, 512 spans
    a batch): what production runs with; nothing is tuned for the benchmark."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{sink.grpc_address}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
    }


async def tracing(
    plan: Plan, results: Results, traced: Mesh | BaseException, sink: ServiceProcess, chat: GrpcChat
) -> None:
    with results.section("tracing", ("tracing_overhead",)):
        if isinstance(traced, BaseException):
            raise RuntimeError(f"the traced mesh did not start: {describe_error(traced)}") from traced
        try:
            traced_client = traced.client()
            try:
                traced_token = await traced_client.login()
                traced_agent = await traced_client.seed_agent(
                    traced_token, name="assistant", mock_responses=["hello, one step"]
                )
            finally:
                await traced_client.close()
            traced_chat = GrpcChat(traced.channel(traced.gateway_address), traced_agent)
            await warm_up(traced_chat, plan.warmup_calls)
            measured = await latency_rounds(
                {"off": chat, "on": traced_chat}, rounds=plan.rounds, per_round=plan.compare_calls
            )
            # The same chat's CPU with tracing on, by service: the cost latency hides in noise.
            cpu_traced = await cpu_per_call(
                traced_chat, plan.latency_calls, {service: [traced.pid(service)] for service in SERVICES}
            )
            exports, size = await _exported(sink.grpc_address)
        finally:
            await traced.stop()  # its memory and CPU are not the streams section's
        if not exports:
            raise RuntimeError("tracing was on, but the OTLP sink received no export")
        results.details["tracing"] = {
            **{name: m.summary() for name, m in measured.items()},
            "cpu_ms_per_chat_traced": cpu_traced,
            "otlp_exports": exports,
            "otlp_bytes": size,
        }
        results.set("tracing_overhead", measured["on"].p50_ms / measured["off"].p50_ms)


async def _exported(address: str, *, wait_seconds: float = 12.0) -> tuple[int, int]:
    """What the sink received, waiting for the batch processors' schedule (5 s by default)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        exports, size = await otlp_sink.received(address)
        if exports or time.monotonic() > deadline:
            return exports, size
        await asyncio.sleep(0.5)
