"""One benchmark run: start the baselines and the mesh as separate processes on loopback, measure
every figure as a ratio against a baseline measured in the same run, and return the
results.

Order of work: PostgreSQL (throwaway, from the local binaries, or the server
`AGENTMESH_TEST_DATABASE_URL` names), the raw gRPC processes (echo server and two proxies), one
mesh; then the sections below, each of which may fail on its own (its figures are then None with
the reason) without costing the others. The tracing section starts a second, traced mesh beside
the first and stops it afterwards; the 1,000-stream section runs last, as it is the heaviest.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from agentmesh.runtime.message_counts import COUNT_DIR_ENV
from bench import otlp_sink
from bench.appends import appends
from bench.chains import FloorChain, RawChain
from bench.cpu import cpu_per_call
from bench.mesh import (
    SERVICES,
    GrpcChat,
    HttpChat,
    MemoryAppender,
    Mesh,
    StreamingChat,
    rss_mb,
    seed_delegation_chain,
    start_mesh,
    wait_quiet,
)
from bench.messages import messages_per_call
from bench.rawdb import event_json
from bench.report import REPO, Results, describe_error, machine_info
from bench.stats import Latency, latency_rounds, same_call, throughput_rounds, warm_up
from tests.e2e.harness import ServiceProcess
from tests.mesh import MeshClient, Seeded
from tests.postgres import fresh_database, libpq_dsn, postgres_server_url

logger = logging.getLogger(__name__)

QPS_IN_FLIGHT = 64
DELEGATION_DEPTH = 4


@dataclass(frozen=True)
class Plan:
    """How much of everything a run measures. Counts are per contender per round."""

    name: str
    rounds: int  # A/B rounds every comparison is interleaved over
    latency_calls: int  # one in flight: chat vs chain
    compare_calls: int  # one in flight: the other A/B comparisons (HTTP, tracing, history)
    warmup_calls: int
    burst_seconds: float  # one throughput burst
    # The append figures' rounds: with three, a figure moved by 10-17 % between two runs of the
    # same tree (docs/performance.md).
    append_rounds: int
    burst_max_calls: int
    concurrency_levels: tuple[int, ...]  # the chat/chain throughput sweep (details)
    delegation_calls: int
    history_long: int  # prior events of the long session (the figure names 10,000)
    history_short: int
    history_middle: int  # an extra point for the growth curve (details)
    streams: int  # concurrent open StreamChat streams (the figure names 5,000)
    stream_chunks: int
    stream_chunk_delay_seconds: float
    stream_channels: int
    stream_timeout_seconds: float


FULL = Plan(
    name="full",
    rounds=3,
    latency_calls=100,
    compare_calls=60,
    warmup_calls=10,
    burst_seconds=3.0,
    append_rounds=6,
    burst_max_calls=20_000,
    concurrency_levels=(1, 8, 64),
    delegation_calls=12,
    history_long=10_000,
    history_short=10,
    history_middle=1_000,
    # 5,000 streams, as the target names. Each lives 6 x 15 s, so that all are open at once
    # even when starting them takes a minute on a loaded host; a stream that has not ended
    # after stream_timeout_seconds fails, which bounds the section.
    streams=5000,
    stream_chunks=6,
    stream_chunk_delay_seconds=15.0,
    stream_channels=250,
    stream_timeout_seconds=300.0,
)

SMOKE = Plan(
    name="smoke",
    rounds=2,
    latency_calls=5,
    compare_calls=3,
    warmup_calls=2,
    burst_seconds=0.3,
    append_rounds=2,
    burst_max_calls=200,
    concurrency_levels=(1, 8),
    delegation_calls=2,
    history_long=500,
    history_short=10,
    history_middle=100,
    streams=40,
    stream_chunks=3,
    stream_chunk_delay_seconds=0.3,
    stream_channels=4,
    stream_timeout_seconds=60.0,
)


SECTIONS = ("chat", "tracing", "throughput", "http", "delegation", "history", "appends", "streams")


async def run(plan: Plan, *, log_dir: Path, only: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Measures everything `plan` asks for (only the `SECTIONS` named in `only`, when given:
    a quicker run while working on one figure); returns the results document."""

    def wanted(section: str) -> bool:
        return not only or section in only

    results = Results(plan=plan.name)
    results.details["plan"] = asdict(plan)
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        server_url = stack.enter_context(postgres_server_url())
        raw_url = await stack.enter_async_context(fresh_database(server_url))
        mesh_url = await stack.enter_async_context(fresh_database(server_url))
        postgres_version = await _postgres_version(raw_url)
        machine = machine_info(postgres_version)

        chain = await stack.enter_async_context(RawChain.start(log_dir))
        floor = await stack.enter_async_context(FloorChain.start(log_dir, libpq_dsn(raw_url)))
        sink = ServiceProcess(
            "otlp-sink", [sys.executable, "-m", "bench.otlp_sink"], env={}, log_dir=log_dir, cwd=REPO
        )
        await sink.start(timeout=30)
        stack.push_async_callback(sink.stop)
        traced_url = await stack.enter_async_context(fresh_database(server_url))
        # Both meshes start together (most of a smoke run's time is starting processes); the
        # traced one is stopped as soon as the tracing section is done with it.
        mesh, traced = await asyncio.gather(
            start_mesh("mesh", database_url=mesh_url, log_dir=log_dir, extra_env=_counting_env(log_dir)),
            start_mesh("traced", database_url=traced_url, log_dir=log_dir, extra_env=_exporter_env(sink)),
            return_exceptions=True,
        )
        for started_mesh in (mesh, traced):
            if isinstance(started_mesh, Mesh):
                stack.push_async_callback(started_mesh.stop)
        if isinstance(mesh, BaseException):
            raise mesh
        client = mesh.client()
        stack.push_async_callback(client.close)
        token = await client.login()
        assistant = await client.seed_agent(token, name="assistant", mock_responses=["hello, one step"])
        chat = GrpcChat(mesh.channel(mesh.gateway_address), assistant)
        await warm_up(chat, plan.warmup_calls)

        if wanted("chat"):
            await _chat_vs_chain(plan, results, chain, floor, mesh, chat, make_url(server_url).port)
        if wanted("tracing"):
            # Early, while both meshes hold as little data as each other.
            await _tracing(plan, results, traced, sink, chat)
        if wanted("throughput"):
            await _chat_throughput(plan, results, chain, floor, chat)
        if wanted("http"):
            await _http_vs_grpc(plan, results, mesh, assistant, chat)
        if wanted("delegation"):
            await _delegation(plan, results, mesh, client, token, assistant)
        if wanted("history"):
            await _history(plan, results, mesh, client, token, assistant)
        if wanted("appends"):
            await appends(plan, results, mesh, raw_url, mesh_url, assistant, log_dir)
        if wanted("streams"):
            await _streams(plan, results, mesh, client, token, assistant)

    machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return results.to_json(machine, duration_seconds=round(time.monotonic() - started, 1))


# --- sections ----------------------------------------------------------------------------------


async def _chat_vs_chain(
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
        messages = await _messages(mesh, chat, plan.latency_calls)
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


async def _chat_throughput(
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


async def _http_vs_grpc(plan: Plan, results: Results, mesh: Mesh, assistant: Seeded, chat: GrpcChat) -> None:
    with results.section("http vs grpc", ("http_vs_grpc",)):
        http = HttpChat(mesh.http(), assistant)
        await warm_up(http, plan.warmup_calls)
        measured = await latency_rounds(
            {"grpc": chat, "http": http}, rounds=plan.rounds, per_round=plan.compare_calls
        )
        results.details["http_vs_grpc"] = {name: value.summary() for name, value in measured.items()}
        results.set("http_vs_grpc", measured["http"].p50_ms / measured["grpc"].p50_ms)


async def _delegation(
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
            str(depth): await _messages(mesh, by_depth[str(depth)], plan.delegation_calls)
            for depth in (0, DELEGATION_DEPTH)
        }
        results.details["delegation"]["messages_per_chat_by_depth"] = messages
        per_level = (messages[str(DELEGATION_DEPTH)]["total"] - messages["0"]["total"]) / DELEGATION_DEPTH
        results.set("messages_per_delegation_level", per_level, digits=2)
        results.checks["delegation_linear"] = linear
        if not per_hop or per_hop <= 0:
            raise RuntimeError(f"no usable raw per-hop increment ({per_hop!r}) from the chat latency section")
        results.set("delegation_hop_ratio", slope / per_hop)


async def _history(
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


def _counting_env(log_dir: Path) -> dict[str, str]:
    """The measured mesh counts its gRPC messages (bench/messages.py) into the log directory."""
    directory = log_dir / "message-counts"
    directory.mkdir(parents=True, exist_ok=True)
    return {COUNT_DIR_ENV: str(directory)}


async def _messages(mesh: Mesh, call: Any, count: int) -> dict[str, Any]:
    directory = Path(mesh.processes["gateway"].env[COUNT_DIR_ENV])
    pids = {service: mesh.pid(service) for service in SERVICES}
    return await messages_per_call(call, count, pids, directory)


def _exporter_env(sink: ServiceProcess) -> dict[str, str]:
    """OTLP export to the sink. The batch processor keeps its defaults (5 s schedule, 512 spans
    a batch): what production runs with; nothing is tuned for the benchmark."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{sink.grpc_address}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
    }


async def _tracing(
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


async def _streams(
    plan: Plan, results: Results, mesh: Mesh, client: MeshClient, token: str, project: Seeded
) -> None:
    keys = ("streams_5000_errors", "streams_5000_rss_mb")
    with results.section("streams", keys):
        chunk = "streamed text " * 4  # under the mock's 64-character chunk size: one chunk each
        script = [{"content": chunk * plan.stream_chunks, "delay_seconds": plan.stream_chunk_delay_seconds}]
        streamer = await client.seed_agent(token, name="streamer", mock_responses=script, project=project)
        await wait_quiet()
        pids = {service: mesh.pid(service) for service in ("gateway", "executor")}
        rss_before = {service: round(rss_mb(pid), 1) for service, pid in pids.items()}
        channels = [mesh.channel(mesh.gateway_address) for _ in range(plan.stream_channels)]
        chats = [StreamingChat(channel, streamer) for channel in channels]
        running = peak_running = 0
        errors: list[str] = []
        errors_after: list[float] = []  # seconds from the first stream's start to each failure
        peak_rss = 0.0
        all_running_at: float | None = None
        done = asyncio.Event()
        begin = time.monotonic()

        def started() -> None:
            nonlocal running, peak_running, all_running_at
            running += 1
            peak_running = max(peak_running, running)
            if running == plan.streams and all_running_at is None:
                all_running_at = time.monotonic() - begin

        async def one(number: int) -> None:
            nonlocal running
            chat = chats[number % len(chats)]
            opened = False

            def on_first_event() -> None:
                nonlocal opened
                opened = True
                started()

            try:
                await chat(on_first_event, timeout=plan.stream_timeout_seconds)
            except Exception as error:  # every failure counts; the first few are kept
                errors.append(describe_error(error))
                errors_after.append(time.monotonic() - begin)
            finally:
                if opened:
                    running -= 1

        async def sample_rss() -> None:
            nonlocal peak_rss
            while not done.is_set():
                peak_rss = max(peak_rss, sum(rss_mb(pid) for pid in pids.values()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), 0.2)

        sampler = asyncio.create_task(sample_rss())
        try:
            await asyncio.gather(*(one(number) for number in range(plan.streams)))
        finally:
            done.set()
            await sampler
        results.details["streams"] = {
            "streams": plan.streams,
            # Streams that had their run started (first event) and not yet ended, at most at once.
            "peak_running": peak_running,
            "all_running_after_seconds": None if all_running_at is None else round(all_running_at, 2),
            "errors": len(errors),
            "first_errors": errors[:5],
            "errors_after_seconds": {
                "first": round(min(errors_after), 2),
                "median": round(statistics.median(errors_after), 2),
                "last": round(max(errors_after), 2),
            }
            if errors_after
            else None,
            "seconds": round(time.monotonic() - begin, 2),
            "stream_life_seconds": plan.stream_chunks * plan.stream_chunk_delay_seconds,
            "rss_mb_before": rss_before,
            "rss_mb_after": {service: round(rss_mb(pid), 1) for service, pid in pids.items()},
            "peak_rss_mb_gateway_plus_executor": round(peak_rss, 1),
        }
        results.checks["streams_all_open_at_once"] = peak_running == plan.streams
        results.set("streams_5000_errors", len(errors), digits=0)
        results.set("streams_5000_rss_mb", peak_rss, digits=1)


# --- helpers -----------------------------------------------------------------------------------


def _linear_fit(xs: list[int], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R² of ys over xs."""
    slope, intercept = statistics.linear_regression(xs, ys)
    mean = statistics.fmean(ys)
    total = sum((y - mean) ** 2 for y in ys)
    residual = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, intercept, 1 - residual / total if total else 1.0


async def _postgres_version(url: str) -> str:
    connection = await asyncpg.connect(libpq_dsn(url))
    try:
        return str(await connection.fetchval("SHOW server_version"))
    finally:
        await connection.close()
