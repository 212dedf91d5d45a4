"""The history section: a chat in a session with a long history against one with a short history."""

from __future__ import annotations

import uuid

from bench.mesh import GrpcChat, MemoryAppender, Mesh
from bench.plan import Plan
from bench.rawdb import event_json
from bench.report import Results
from bench.stats import latency_rounds, warm_up
from tests.mesh import MeshClient, Seeded


async def history(
    plan: Plan, results: Results, mesh: Mesh, client: MeshClient, token: str, project: Seeded
) -> None:
    with results.section("history", ("history_ratio",)):
        historian = await client.seed_agent(
            token, name="historian", mock_responses=["noted"], project=project
        )
        appender = MemoryAppender(
            mesh.channel(mesh.memory_address), project_id=historian.project_id, content=event_json()
        )
        sizes = sorted({plan.history_short, plan.history_middle, plan.history_long})
        sessions: dict[str, str] = {}
        for size in sizes:
            session = f"bench-history-{size}-{uuid.uuid4().hex[:8]}"
            await appender.fill(session, agent=historian.agent_name, events=size)
            sessions[str(size)] = session
        chat = GrpcChat(mesh.channel(mesh.gateway_address), historian)

        def in_session(session: str):
            return lambda: chat(session)

        contenders = {size: in_session(session) for size, session in sessions.items()}
        for call in contenders.values():
            await warm_up(call, max(1, plan.warmup_calls // 4))
        measured = await latency_rounds(contenders, rounds=plan.rounds, per_round=plan.compare_calls)
        results.details["history"] = {f"{size}_events": m.summary() for size, m in measured.items()}
        long, short = measured[str(plan.history_long)], measured[str(plan.history_short)]
        results.set("history_ratio", long.p50_ms / short.p50_ms)
