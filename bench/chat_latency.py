"""The chat latency section: one chat at a time against the raw gRPC chain and the floor chain,
the first text delta, CPU per call by process and gRPC messages per chat.
"""

from __future__ import annotations

from bench.chains import FloorChain, RawChain
from bench.counting import mesh_messages
from bench.cpu import cpu_per_call
from bench.mesh import SERVICES, GrpcChat, Mesh
from bench.plan import Plan
from bench.report import Results
from bench.stats import Latency, latency_rounds, warm_up


async def chat_latency(
    plan: Plan,
    results: Results,
    chain: RawChain,
    floor: FloorChain,
    mesh: Mesh,
    chat: GrpcChat,
    postgres_port: int,
) -> None:
    keys = ("chat_p50_ratio", "chat_p99_ratio", "first_token_ratio", "delegation_hop_ratio")
    with results.section("chat latency", keys):
        await warm_up(chain.unary, plan.warmup_calls)
        await warm_up(chain.chain, plan.warmup_calls)
        await warm_up(chain.two_hops, plan.warmup_calls)
        await warm_up(floor, plan.warmup_calls)
        chat.first_token_seconds.clear()
        floor.first_message_seconds.clear()
        measured = await latency_rounds(
            {
                "unary": chain.unary,
                "chain": chain.chain,
                "chain_2_hops": chain.two_hops,
                "floor": floor,
                "chat": chat,
            },
            rounds=plan.rounds,
            per_round=plan.latency_calls,
        )
        unary, hops, chats = measured["unary"], measured["chain"], measured["chat"]
        # Request -> first text delta at the client, against the raw 2-hop chain (client ->
        # proxy -> echo: as a chat's text goes executor -> gateway -> client).
        first_tokens = Latency(samples=list(chat.first_token_seconds))
        results.details["first_token"] = first_tokens.summary()
        results.set("first_token_ratio", first_tokens.p50_ms / measured["chain_2_hops"].p50_ms)
        results.baselines.update(
            unary_p50_ms=round(unary.p50_ms, 3),
            unary_p99_ms=round(unary.p99_ms, 3),
            chain_p50_ms=round(hops.p50_ms, 3),
            chain_p99_ms=round(hops.p99_ms, 3),
            # Two proxies between the client and the echo: what one more process on the path costs.
            per_hop_ms=round((hops.p50_ms - unary.p50_ms) / 2, 3),
        )
        results.details["chat_latency"] = {name: value.summary() for name, value in measured.items()}
        results.set("chat_p50_ratio", chats.p50_ms / hops.p50_ms)
        results.set("chat_p99_ratio", chats.p99_ms / hops.p99_ms)
        floors = measured["floor"]
        # The design's floor against the figures' baseline, and the chat against the floor.
        results.details["floor"] = {
            "p50_ratio_to_chain": round(floors.p50_ms / hops.p50_ms, 3),
            "p99_ratio_to_chain": round(floors.p99_ms / hops.p99_ms, 3),
            "chat_p50_ratio_to_floor": round(chats.p50_ms / floors.p50_ms, 3),
            "first_message_p50_ratio_to_2_hop_chain": round(
                Latency(samples=list(floor.first_message_seconds)).p50_ms / measured["chain_2_hops"].p50_ms, 3
            ),
        }
        # Where the time goes: CPU per call by process (a busy machine stretches latency; it does
        # not change how much work a chat is).
        cpu = {
            "chain": await cpu_per_call(chain.chain, plan.latency_calls, chain.pids()),
            "floor": await cpu_per_call(floor, plan.latency_calls, floor.pids(), postgres_port=postgres_port),
            "chat": await cpu_per_call(
                chat,
                plan.latency_calls,
                {service: [mesh.pid(service)] for service in SERVICES},
                postgres_port=postgres_port,
            ),
        }
        results.details["cpu_ms_per_call"] = cpu
        # How many gRPC messages a chat makes, and what each costs: the chain makes 6 (three
        # calls of one request and one response).
        messages = await mesh_messages(mesh, chat, plan.latency_calls)
        results.details["messages_per_chat"] = messages
        results.details["cpu_ms_per_message"] = {
            "chat": round(cpu["chat"]["total"] / messages["total"], 3),
            "chain": round(cpu["chain"]["total"] / 6, 3),
            # The floor: its stream's request and two messages, relayed once (6), two appends (4).
            "floor": round(cpu["floor"]["total"] / 10, 3),
        }
        chain_cpu = cpu["chain"]["total"]  # 0 in a smoke run's few calls: /proc counts in ticks
        results.details["floor"]["cpu_ratio_to_chain"] = (
            round(cpu["floor"]["total"] / chain_cpu, 3) if chain_cpu else None
        )
        results.set("messages_per_chat", messages["total"], digits=2)
