"""The delegation section: chats that delegate 0 to DELEGATION_DEPTH levels down a chain of
agents; what each level adds, against the raw per-hop increment of the chat latency section.
"""

from __future__ import annotations

import itertools
import statistics

from bench.counting import mesh_messages
from bench.cpu import cpu_per_call
from bench.mesh import SERVICES, GrpcChat, Mesh, seed_delegation_chain
from bench.plan import Plan
from bench.report import Results
from bench.stats import latency_rounds, warm_up
from tests.mesh import MeshClient, Seeded

DELEGATION_DEPTH = 4  # levels of the deepest delegation chain


async def delegation(
    plan: Plan, results: Results, mesh: Mesh, client: MeshClient, token: str, project: Seeded
) -> None:
    with results.section("delegation", ("delegation_hop_ratio",)):
        hop_agents = await seed_delegation_chain(client, token, depth=DELEGATION_DEPTH, project=project)
        channel = mesh.channel(mesh.gateway_address)
        # Chatting with hop{D-k} delegates k levels down the chain.
        by_depth = {
            str(depth): GrpcChat(channel, hop_agents[DELEGATION_DEPTH - depth], delegations=depth)
            for depth in range(DELEGATION_DEPTH + 1)
        }
        for call in by_depth.values():
            await warm_up(call, max(1, plan.warmup_calls // 4))
        measured = await latency_rounds(by_depth, rounds=plan.rounds, per_round=plan.delegation_calls)
        depths = [int(depth) for depth in measured]
        p50s = [measured[str(depth)].p50_ms for depth in depths]
        slope, intercept, r_squared = _linear_fit(depths, p50s)
        increments = [later - earlier for earlier, later in itertools.pairwise(p50s)]
        # Linear: every level adds about the same (within half the mean step either way).
        linear = slope > 0 and all(abs(step - slope) <= 0.5 * slope for step in increments)
        per_hop = results.baselines.get("per_hop_ms")
        results.details["delegation"] = {
            "p50_ms_by_depth": {str(d): round(p, 3) for d, p in zip(depths, p50s, strict=True)},
            "p99_ms_by_depth": {d: round(m.p99_ms, 3) for d, m in measured.items()},
            "added_p50_ms_per_level": round(slope, 3),
            "increments_ms": [round(step, 3) for step in increments],
            "intercept_ms": round(intercept, 3),
            "r_squared": round(r_squared, 4),
        }
        services = {service: [mesh.pid(service)] for service in SERVICES}
        results.details["delegation"]["cpu_ms_per_chat_by_depth"] = {
            str(depth): await cpu_per_call(by_depth[str(depth)], plan.delegation_calls, services)
            for depth in (0, DELEGATION_DEPTH)
        }
        messages = {
            str(depth): await mesh_messages(mesh, by_depth[str(depth)], plan.delegation_calls)
            for depth in (0, DELEGATION_DEPTH)
        }
        results.details["delegation"]["messages_per_chat_by_depth"] = messages
        per_level = (messages[str(DELEGATION_DEPTH)]["total"] - messages["0"]["total"]) / DELEGATION_DEPTH
        results.set("messages_per_delegation_level", per_level, digits=2)
        results.checks["delegation_linear"] = linear
        if not per_hop or per_hop <= 0:
            # Two p50s a fraction of a millisecond apart: with few samples on a busy host their
            # difference can come out at or below zero, and a ratio to it means nothing.
            raise RuntimeError(
                f"no usable raw per-hop increment ({per_hop!r}) from the chat latency section: {HOP_IN_NOISE}"
            )
        results.set("delegation_hop_ratio", slope / per_hop)


HOP_IN_NOISE = "the raw chain's extra hops measured within the noise"


def _linear_fit(xs: list[int], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R² of ys over xs."""
    slope, intercept = statistics.linear_regression(xs, ys)
    mean = statistics.fmean(ys)
    total = sum((y - mean) ** 2 for y in ys)
    residual = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, intercept, 1 - residual / total if total else 1.0
