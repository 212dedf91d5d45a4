"""The append figures (issue 16): the memory service's AppendEvents against a raw gRPC unary call
whose server inserts one row with asyncpg (like with like), one writer and sixteen, and one
writer's 10,000 events in calls of BATCH_EVENTS against asyncpg batches of the same size. The
definitions before issue 16 (against asyncpg in process) stay in the details, for continuity."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from bench import echo
from bench.mesh import MemoryAppender, Mesh
from bench.rawdb import BATCH_EVENTS, RawEventWriter
from bench.report import REPO, Results
from bench.stats import same_call, throughput_rounds, warm_up
from tests.e2e.harness import ServiceProcess
from tests.mesh import Seeded
from tests.postgres import libpq_dsn

if TYPE_CHECKING:
    from bench.run import Plan

APPEND_WRITERS = 16
BATCHED_EVENTS = 10_000  # append_batched_ratio: one writer's events, in calls of BATCH_EVENTS


async def appends(
    plan: Plan, results: Results, mesh: Mesh, raw_url: str, project: Seeded, log_dir: Path
) -> None:
    keys = ("append_single_ratio", "append_batched_ratio", "append_concurrent_ratio")
    with results.section("appends", keys):
        raw = await RawEventWriter.connect(libpq_dsn(raw_url), connections=APPEND_WRITERS)
        # Issue 16's baseline: a raw gRPC unary call whose server inserts one row with asyncpg —
        # like with like (the old figures compared a gRPC call with an in-process insert).
        inserter = ServiceProcess(
            "raw-insert",
            [sys.executable, "-m", "bench.echo", "insert", "--dsn", libpq_dsn(raw_url)],
            env={},
            log_dir=log_dir,
            cwd=REPO,
        )
        await inserter.start(timeout=30)
        insert_channel = grpc.aio.insecure_channel(inserter.grpc_address)
        try:
            insert = echo.echo_call(insert_channel)
            payload = raw.content.encode()

            async def raw_grpc() -> None:
                await insert(payload, timeout=10)

            channel = mesh.channel(mesh.memory_address)
            appender = MemoryAppender(channel, project_id=project.project_id, content=raw.content)
            # Each writer its own session, created by its first append (not timed).
            mesh_sessions = [appender.session() for _ in range(APPEND_WRITERS)]
            for append in mesh_sessions:
                await append()
            mesh_batches = appender.session(events=BATCH_EVENTS)
            await warm_up(raw_grpc, plan.warmup_calls)
            single = await throughput_rounds(
                {
                    "raw": same_call(raw.single()),
                    "raw_grpc": same_call(raw_grpc),
                    "mesh": same_call(mesh_sessions[0]),
                },
                rounds=plan.rounds,
                in_flight=1,
                seconds=plan.burst_seconds,
                max_calls=plan.burst_max_calls,
            )
            concurrent = await throughput_rounds(
                {
                    "raw": raw.concurrent(),
                    "raw_grpc": same_call(raw_grpc),
                    "mesh": lambda worker: mesh_sessions[worker],
                },
                rounds=plan.rounds,
                in_flight=APPEND_WRITERS,
                seconds=plan.burst_seconds,
                max_calls=plan.burst_max_calls,
            )
            # One writer, 10,000 events (at most) in calls of BATCH_EVENTS: AppendEvents batches
            # against asyncpg's executemany in one transaction.
            batched = await throughput_rounds(
                {"raw": same_call(raw.batched()), "mesh": same_call(mesh_batches)},
                rounds=plan.rounds,
                in_flight=1,
                seconds=plan.burst_seconds,
                max_calls=max(1, BATCHED_EVENTS // BATCH_EVENTS),
            )
        finally:
            await insert_channel.close()
            await inserter.stop()
            await raw.close()
        for measured in (single, concurrent, batched):
            if measured["mesh"].errors:
                raise RuntimeError(
                    f"{measured['mesh'].errors} appends failed: {measured['mesh'].first_error}"
                )
        results.baselines.update(
            asyncpg_single_events_per_s=round(single["raw"].per_second, 1),
            grpc_asyncpg_single_events_per_s=round(single["raw_grpc"].per_second, 1),
            asyncpg_16_connections_events_per_s=round(concurrent["raw"].per_second, 1),
            grpc_asyncpg_16_in_flight_events_per_s=round(concurrent["raw_grpc"].per_second, 1),
            asyncpg_batched_100_events_per_s=round(batched["raw"].per_second * BATCH_EVENTS, 1),
        )
        results.details["appends"] = {
            "single": {name: m.summary() for name, m in single.items()},
            "concurrent_16": {name: m.summary() for name, m in concurrent.items()},
            "batched_100": {name: m.summary() for name, m in batched.items()},
            # The definitions before issue 16 (against asyncpg in process), for continuity.
            "old_append_single_ratio": round(single["mesh"].per_second / single["raw"].per_second, 3),
            "old_append_concurrent_ratio": round(
                concurrent["mesh"].per_second / concurrent["raw"].per_second, 3
            ),
        }
        results.set("append_single_ratio", single["mesh"].per_second / single["raw_grpc"].per_second)
        results.set("append_batched_ratio", batched["mesh"].per_second / batched["raw"].per_second)
        results.set(
            "append_concurrent_ratio", concurrent["mesh"].per_second / concurrent["raw_grpc"].per_second
        )
