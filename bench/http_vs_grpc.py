"""The HTTP section: the same chat over the gateway's HTTP face against its gRPC face."""

from __future__ import annotations

from bench.mesh import GrpcChat, HttpChat, Mesh
from bench.plan import Plan
from bench.report import Results
from bench.stats import latency_rounds, warm_up
from tests.mesh import Seeded


async def http_vs_grpc(plan: Plan, results: Results, mesh: Mesh, assistant: Seeded, chat: GrpcChat) -> None:
    with results.section("http vs grpc", ("http_vs_grpc",)):
        http = HttpChat(mesh.http(), assistant)
        await warm_up(http, plan.warmup_calls)
        measured = await latency_rounds(
            {"grpc": chat, "http": http}, rounds=plan.rounds, per_round=plan.compare_calls
        )
        results.details["http_vs_grpc"] = {name: value.summary() for name, value in measured.items()}
        results.set("http_vs_grpc", measured["http"].p50_ms / measured["grpc"].p50_ms)
