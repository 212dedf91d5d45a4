"""The append figures: the memory service's AppendEvents against a raw gRPC unary call
whose server inserts one row with asyncpg (like with like), one writer and sixteen, and one
writer's 10,000 events in calls of BATCH_EVENTS against asyncpg batches of the same size. Beside
them, the floor of an append in this design (`details.appends.floor`): the memory service's own
one-statement append run by a plain gRPC server with asyncpg, on the mesh's database — so each
figure can be read as what the design's database work allows and what the service adds. The
definitions of these figures (against asyncpg in process) stay in the details, for continuity."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from bench import echo
from bench.chains import echo_processes
from bench.mesh import MemoryAppender, Mesh
from bench.rawdb import BATCH_EVENTS, RawEventWriter
from bench.report import Results
from bench.stats import Call, Throughput, same_call, throughput_rounds, warm_up
from tests.mesh import Seeded
from tests.postgres import libpq_dsn

if TYPE_CHECKING:
    from bench.run import Plan

APPEND_WRITERS = 16
BATCHED_EVENTS = 10_000  # append_batched_ratio: one writer's events, in calls of BATCH_EVENTS


@contextlib.asynccontextmanager
async def _echo_server(role: str, url: str, log_dir: Path) -> AsyncIterator[grpc.aio.UnaryUnaryMultiCallable]:
    """A `bench.echo` server of `role` writing to the database at `url`, as its own process: its
    call."""
    async with (
        echo_processes(log_dir, [(f"raw-{role}", [role, "--dsn", libpq_dsn(url)])]) as (process,),
        grpc.aio.insecure_channel(process.grpc_address) as channel,
    ):
        yield echo.echo_call(channel)


async def appends(
    plan: Plan, results: Results, mesh: Mesh, raw_url: str, mesh_url: str, project: Seeded, log_dir: Path
) -> None:
    keys = ("append_single_ratio", "append_batched_ratio", "append_concurrent_ratio")
    with results.section("appends", keys):
        raw = await RawEventWriter.connect(libpq_dsn(raw_url), connections=APPEND_WRITERS)
        try:
            # The baseline: a raw gRPC unary call whose server inserts one row with
            # asyncpg — like with like (the old figures compared a gRPC call with an in-process
            # insert). And the floor: the memory service's statement, in the mesh's database.
            async with (
                _echo_server("insert", raw_url, log_dir) as insert,
                _echo_server("append", mesh_url, log_dir) as floor_append,
            ):
                single, concurrent, batched = await _measure(plan, mesh, project, raw, insert, floor_append)
        finally:
            await raw.close()
        for measured in (single, concurrent, batched):
            for name in ("mesh", "floor"):
                if measured[name].errors:
                    raise RuntimeError(
                        f"{measured[name].errors} {name} appends failed: {measured[name].first_error}"
                    )
        _report(results, single, concurrent, batched)


async def _measure(
    plan: Plan,
    mesh: Mesh,
    project: Seeded,
    raw: RawEventWriter,
    insert: grpc.aio.UnaryUnaryMultiCallable,
    floor_append: grpc.aio.UnaryUnaryMultiCallable,
) -> tuple[dict[str, Throughput], dict[str, Throughput], dict[str, Throughput]]:
    """The three shapes, each for the raw baseline, the floor and the mesh."""
    payload = raw.content.encode()

    async def raw_grpc() -> None:
        await insert(payload, timeout=10)

    def floor_session(events: int = 1) -> Call:
        request = f"{uuid.uuid4().hex}\n{events}\n{raw.content}".encode()

        async def append() -> None:
            await floor_append(request, timeout=30)

        return append

    channel = mesh.channel(mesh.memory_address)
    appender = MemoryAppender(channel, project_id=project.project_id, content=raw.content)
    # Each writer its own session, created by its first append (not timed).
    mesh_sessions = [appender.session() for _ in range(APPEND_WRITERS)]
    floor_sessions = [floor_session() for _ in range(APPEND_WRITERS)]
    for append in (*mesh_sessions, *floor_sessions):
        await append()
    mesh_batches = appender.session(events=BATCH_EVENTS)
    floor_batches = floor_session(BATCH_EVENTS)
    await warm_up(raw_grpc, plan.warmup_calls)
    single = await throughput_rounds(
        {
            "raw": same_call(raw.single()),
            "raw_grpc": same_call(raw_grpc),
            "floor": same_call(floor_sessions[0]),
            "mesh": same_call(mesh_sessions[0]),
        },
        rounds=plan.append_rounds,
        in_flight=1,
        seconds=plan.burst_seconds,
        max_calls=plan.burst_max_calls,
    )
    concurrent = await throughput_rounds(
        {
            "raw": raw.concurrent(),
            "raw_grpc": same_call(raw_grpc),
            "floor": lambda worker: floor_sessions[worker],
            "mesh": lambda worker: mesh_sessions[worker],
        },
        rounds=plan.append_rounds,
        in_flight=APPEND_WRITERS,
        seconds=plan.burst_seconds,
        max_calls=plan.burst_max_calls,
    )
    # One writer, 10,000 events (at most) in calls of BATCH_EVENTS: AppendEvents batches against
    # asyncpg's executemany in one transaction.
    batched = await throughput_rounds(
        {"raw": same_call(raw.batched()), "floor": same_call(floor_batches), "mesh": same_call(mesh_batches)},
        rounds=plan.append_rounds,
        in_flight=1,
        seconds=plan.burst_seconds,
        max_calls=max(1, BATCHED_EVENTS // BATCH_EVENTS),
    )
    return single, concurrent, batched


def _report(
    results: Results,
    single: dict[str, Throughput],
    concurrent: dict[str, Throughput],
    batched: dict[str, Throughput],
) -> None:
    results.baselines.update(
        asyncpg_single_events_per_s=round(single["raw"].per_second, 1),
        grpc_asyncpg_single_events_per_s=round(single["raw_grpc"].per_second, 1),
        asyncpg_16_connections_events_per_s=round(concurrent["raw"].per_second, 1),
        grpc_asyncpg_16_in_flight_events_per_s=round(concurrent["raw_grpc"].per_second, 1),
        asyncpg_batched_100_events_per_s=round(batched["raw"].per_second * BATCH_EVENTS, 1),
    )
    # Each figure's baseline, and the floor's share of it: what the figure is at most in this design.
    shapes = {
        "single": (single, "raw_grpc"),
        "concurrent_16": (concurrent, "raw_grpc"),
        "batched_100": (batched, "raw"),
    }
    results.details["appends"] = {
        **{
            shape: {name: m.summary() for name, m in measured.items()}
            for shape, (measured, _) in shapes.items()
        },
        "floor": {
            shape: {
                "floor_ratio": round(measured["floor"].per_second / measured[baseline].per_second, 3),
                "mesh_over_floor": round(measured["mesh"].per_second / measured["floor"].per_second, 3),
            }
            for shape, (measured, baseline) in shapes.items()
        },
        # The earlier definitions (against asyncpg in process), kept so old runs compare.
        "old_append_single_ratio": round(single["mesh"].per_second / single["raw"].per_second, 3),
        "old_append_concurrent_ratio": round(concurrent["mesh"].per_second / concurrent["raw"].per_second, 3),
    }
    results.set("append_single_ratio", single["mesh"].per_second / single["raw_grpc"].per_second)
    results.set("append_batched_ratio", batched["mesh"].per_second / batched["raw"].per_second)
    results.set("append_concurrent_ratio", concurrent["mesh"].per_second / concurrent["raw_grpc"].per_second)
