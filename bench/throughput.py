"""The chat throughput section: chats, the raw chain and the floor under a sweep of calls in
flight, the figure taken at QPS_IN_FLIGHT.
"""

from __future__ import annotations

from typing import Any

from bench.chains import FloorChain, RawChain
from bench.mesh import GrpcChat
from bench.plan import Plan
from bench.report import Results
from bench.stats import same_call, throughput_rounds

QPS_IN_FLIGHT = 64  # the in-flight level the throughput figure is taken at


async def chat_throughput(
    plan: Plan, results: Results, chain: RawChain, floor: FloorChain, chat: GrpcChat
) -> None:
    with results.section("chat throughput", ("chat_qps_ratio",)):
        sweep: dict[str, dict[str, Any]] = {}
        for in_flight in sorted({*plan.concurrency_levels, QPS_IN_FLIGHT}):
            # The figure's level gets every round; the rest of the sweep (details) one.
            measured = await throughput_rounds(
                {
                    "unary": same_call(chain.unary),
                    "chain": same_call(chain.chain),
                    "floor": same_call(floor),
                    "chat": same_call(chat),
                },
                rounds=plan.rounds if in_flight == QPS_IN_FLIGHT else 1,
                in_flight=in_flight,
                seconds=plan.burst_seconds,
                max_calls=plan.burst_max_calls,
            )
            sweep[str(in_flight)] = {name: value.summary() for name, value in measured.items()}
            if in_flight == QPS_IN_FLIGHT:
                if measured["chat"].errors:
                    raise RuntimeError(
                        f"{measured['chat'].errors} chats failed: {measured['chat'].first_error}"
                    )
                results.baselines.update(
                    unary_qps_64=round(measured["unary"].per_second, 1),
                    chain_qps_64=round(measured["chain"].per_second, 1),
                )
                results.set("chat_qps_ratio", measured["chat"].per_second / measured["chain"].per_second)
                results.details.setdefault("floor", {})["qps_ratio_to_chain"] = round(
                    measured["floor"].per_second / measured["chain"].per_second, 3
                )
        results.details["throughput_by_in_flight"] = sweep
