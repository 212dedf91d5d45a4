"""The streams section: thousands of concurrent StreamChat streams held open at once; errors and
the gateway's and executor's memory while they are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

from bench.mesh import Mesh, StreamingChat, rss_mb, wait_quiet
from bench.plan import Plan
from bench.report import Results, describe_error
from tests.mesh import MeshClient, Seeded


async def streams(
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
