"""`python -m bench.soak [--minutes 60] [--users 200]`: hours of traffic on the mesh as processes
on PostgreSQL (registry, memory, two executors, a gateway, at their default leases), judged for
what only time shows — leaks, drift, runs left behind.

Each simulated user keeps one streaming chat going at a fixed cadence: a coordinator that
delegates to a worker that calls a tool, every model step `--step-seconds` long, so about
`users * chat / cycle` chats are in flight at any time, the same number all along. Every
`--sample-seconds` it samples each process's resident memory, open file descriptors, threads
(from /proc) and unfinished asyncio tasks (the `agentmesh_process_asyncio_tasks` gauge of its
Prometheus endpoint), and the chats' latency per window of `--window-minutes`.

Passes (the first window is warm-up, not judged) when, for every process and resource, the last
window's median is at most 5 % above the first judged window's; the chats' p99 moves at most 20 %
between consecutive windows; no chat failed; the registry's books settle (no agent working, no
run in flight or leased); and no process logged an error line.

Writes `bench/results/soak-<UTC time>.json` (with `"passed"` and every figure it judged) and a
plot of the series beside it (`.png`)."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import httpx

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from bench.report import RESULTS_DIR, machine_info
from bench.stats import percentile
from tests.e2e.harness import ServiceProcess
from tests.faults.load import SignedIn
from tests.faults.processes import Processes, run_bookkeeping, seed_delegating_pair
from tests.mesh import MeshClient, Seeded, bearer
from tests.postgres import fresh_database, postgres_server_url

RESOURCES = ("rss_mb", "open_fds", "threads", "asyncio_tasks")
MAX_GROWTH = 0.05  # a resource's last window over its first judged one
MAX_P99_DRIFT = 0.20  # the chats' p99 from one window to the next
# What every service logs for a failure it did not expect: the level, or an uncaught traceback.
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback \(most recent call last\)")
# The mesh at its defaults, not at the fault tests' two-second leases.
DEFAULT_LEASES = (
    {"AGENTMESH_REGISTRY_RUN_LEASE_SECONDS": "10", "AGENTMESH_REGISTRY_RUN_LEASE_SWEEP_SECONDS": "1"},
    {"AGENTMESH_EXECUTOR_LEASE_RENEW_INTERVAL_SECONDS": "2"},
)


DELEGATE_CALL = {"name": "delegate", "arguments": {"agent": "worker", "task": "the time"}}


@dataclass(frozen=True)
class SoakPlan:
    minutes: float = 60.0
    users: int = 200
    window_minutes: float = 5.0
    sample_seconds: float = 5.0
    step_seconds: float = 2.0  # each of a chat's four model steps
    cycle_seconds: float = 20.0  # how often a user sends a message


@dataclass
class Chat:
    started: float  # seconds since the load began
    seconds: float
    ok: bool
    error: str = ""


@dataclass
class Sample:
    at: float  # seconds since the load began
    resources: dict[str, dict[str, float]] = field(default_factory=dict)  # process -> resource -> value


async def soak(plan: SoakPlan, log_dir: Path) -> dict[str, Any]:
    """Runs the soak on a PostgreSQL server of its own; returns its result document."""
    with postgres_server_url() as server:
        async with fresh_database(server) as url:
            return await soak_on(url, plan, log_dir)


async def soak_on(database_url: str, plan: SoakPlan, log_dir: Path) -> dict[str, Any]:
    """Runs the soak on this (empty) database; returns its result document (`passed` and the
    figures it judged)."""
    registry, executor = DEFAULT_LEASES
    mesh = Processes(database_url, log_dir, registry_env=registry, executor_env=executor, metrics=True)
    await mesh.start()
    try:
        chats, samples = await _load(mesh, plan)
        settled = await _settled(mesh)
    finally:
        await mesh.stop()
    return _judged(plan, chats, samples, settled=settled, error_lines=_error_lines(mesh.services))


async def _load(mesh: Processes, plan: SoakPlan) -> tuple[list[Chat], list[Sample]]:
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        step = plan.step_seconds
        _, coordinator = await seed_delegating_pair(
            client,
            token,
            worker=[
                {"content": "", "tool_calls": [{"name": "get_current_time"}], "delay_seconds": step},
                {"content": "it is the time the tool said", "delay_seconds": step},
            ],
            coordinator=[
                {"content": "", "tool_calls": [DELEGATE_CALL], "delay_seconds": step},
                {"content": "the worker knows the time", "delay_seconds": step},
            ],
        )
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        began = time.monotonic()
        ends = began + plan.minutes * 60
        chats: list[Chat] = []
        samples: list[Sample] = []
        signed_in = SignedIn(client, token)
        async with httpx.AsyncClient(timeout=5) as http:
            sampler = asyncio.create_task(_sample(mesh, http, samples, began, ends, plan.sample_seconds))
            await asyncio.gather(
                *(
                    _user(gateway, coordinator, signed_in, n, plan, chats, began, ends)
                    for n in range(plan.users)
                )
            )
            await sampler
        return chats, samples
    finally:
        await client.close()


async def _user(
    gateway: gw_grpc.GatewayServiceStub,
    agent: Seeded,
    signed_in: SignedIn,
    n: int,
    plan: SoakPlan,
    chats: list[Chat],
    began: float,
    ends: float,
) -> None:
    """One user: a message every `cycle_seconds` (offset by its number, so the load is even), in
    a session that takes ten turns before the user starts another."""
    due = began + plan.cycle_seconds * n / plan.users
    number = 0
    while due < ends:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        started = time.monotonic()
        session_id = f"soak-{n}-{number // 10}"
        ok, error = await _chat(
            gateway, agent, await signed_in.token(), session_id, timeout=plan.step_seconds * 4 + 60
        )
        chats.append(Chat(started - began, time.monotonic() - started, ok, error))
        number += 1
        due = max(due + plan.cycle_seconds, time.monotonic())


async def _chat(
    gateway: gw_grpc.GatewayServiceStub, agent: Seeded, token: str, session_id: str, *, timeout: float
) -> tuple[bool, str]:
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=agent.ref, message="what time is it?", session_id=session_id),
        metadata=bearer(token),
        timeout=timeout,
    )
    final = ""
    try:
        async for response in call:
            if response.event.HasField("run_completed"):
                final = "completed"
            elif response.event.HasField("run_failed"):
                final = f"run_failed: {response.event.run_failed.code} {response.event.run_failed.message}"
    except grpc.aio.AioRpcError as error:
        return False, f"{error.code().name}: {error.details()}"
    return final == "completed", "" if final == "completed" else final or "no final event"


async def _sample(
    mesh: Processes, http: httpx.AsyncClient, samples: list[Sample], began: float, ends: float, every: float
) -> None:
    while time.monotonic() < ends:
        sample = Sample(time.monotonic() - began)
        for process in mesh.services:
            sample.resources[process.name] = {
                **_proc_resources(process),
                "asyncio_tasks": await _asyncio_tasks(http, mesh.metrics_urls[process.name]),
            }
        samples.append(sample)
        await asyncio.sleep(every)


def _proc_resources(process: ServiceProcess) -> dict[str, float]:
    """Resident memory, open file descriptors and threads, as the kernel counts them."""
    proc = Path(f"/proc/{process.pid}")
    status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines() if ":" in line)
    return {
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "open_fds": float(len(list((proc / "fd").iterdir()))),
        "threads": float(status["Threads"].strip()),
    }


async def _asyncio_tasks(http: httpx.AsyncClient, url: str) -> float:
    text = (await http.get(url)).text
    for line in text.splitlines():
        if line.startswith("agentmesh_process_asyncio_tasks"):
            return float(line.rsplit(" ", 1)[1])
    raise RuntimeError(f"{url} reports no asyncio task gauge")


async def _settled(mesh: Processes, *, timeout: float = 60.0) -> bool:
    """Whether the registry's books settle once the load stopped: no agent working, no run in
    flight or leased."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await run_bookkeeping(mesh.database_url)).settled:
            return True
        await asyncio.sleep(0.5)
    return False


def _error_lines(processes: list[ServiceProcess]) -> list[str]:
    lines = []
    for process in processes:
        for path in (process.stdout_path, process.stderr_path):
            if path.exists():
                lines += [
                    f"{process.name}: {line}"
                    for line in path.read_text(errors="replace").splitlines()
                    if ERROR_LINE.search(line)
                ]
    return lines


def _judged(
    plan: SoakPlan, chats: list[Chat], samples: list[Sample], *, settled: bool, error_lines: list[str]
) -> dict[str, Any]:
    window = plan.window_minutes * 60
    count = max(1, round(plan.minutes * 60 / window))
    windows: list[dict[str, Any]] = []
    for index in range(count):
        latencies = [c.seconds for c in chats if index * window <= c.started < (index + 1) * window and c.ok]
        in_window = [s for s in samples if index * window <= s.at < (index + 1) * window]
        resources = {
            process: {
                resource: statistics.median(s.resources[process][resource] for s in in_window)
                for resource in RESOURCES
            }
            for process in (in_window[0].resources if in_window else {})
        }
        windows.append(
            {
                "from_minute": round(index * window / 60, 2),
                "chats": len(latencies),
                "p50_seconds": round(percentile(latencies, 50), 4) if latencies else None,
                "p99_seconds": round(percentile(latencies, 99), 4) if latencies else None,
                "median_resources": resources,
            }
        )
    judged = windows[1:] if len(windows) > 1 else windows
    growth = {
        process: {
            resource: _change(judged[0]["median_resources"][process][resource], last[resource])
            for resource in RESOURCES
        }
        for process, last in judged[-1]["median_resources"].items()
    }
    p99s = [w["p99_seconds"] for w in judged if w["p99_seconds"] is not None]
    drift = max((abs(_change(a, b)) for a, b in itertools.pairwise(p99s)), default=0.0)
    failed = [c for c in chats if not c.ok]
    verdicts = {
        "growth_within_5_percent": all(g <= MAX_GROWTH for per in growth.values() for g in per.values()),
        "p99_drift_within_20_percent": drift <= MAX_P99_DRIFT,
        "no_chat_failed": not failed and bool(chats),
        "books_settled": settled,
        "no_error_line": not error_lines,
    }
    return {
        "plan": asdict(plan),
        "passed": all(verdicts.values()),
        "verdicts": verdicts,
        "chats": len(chats),
        "failed_chats": len(failed),
        "failures": sorted({c.error for c in failed})[:20],
        "max_p99_drift": round(drift, 4),
        "growth": {p: {r: round(g, 4) for r, g in per.items()} for p, per in growth.items()},
        "error_lines": error_lines[:50],
        "windows": windows,
        "series": [{"at": round(s.at, 1), **s.resources} for s in samples],
    }


def _change(before: float, after: float) -> float:
    return (after - before) / before if before else 0.0


def plot(document: dict[str, Any], target: Path) -> None:
    """The resources of every process over time, and the chats' p50/p99 per window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = document["series"]
    processes = [name for name in series[0] if name != "at"] if series else []
    figure, axes = plt.subplots(len(RESOURCES) + 1, 1, figsize=(10, 3 * (len(RESOURCES) + 1)), sharex=True)
    minutes = [s["at"] / 60 for s in series]
    for axis, resource in zip(axes, RESOURCES, strict=False):
        for process in processes:
            axis.plot(minutes, [s[process][resource] for s in series], label=process)
        axis.set_ylabel(resource)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small", ncol=3)
    windows = [w for w in document["windows"] if w["p99_seconds"] is not None]
    latency_axis = axes[-1]
    for key in ("p50_seconds", "p99_seconds"):
        values = [w[key] for w in windows]
        latency_axis.plot([w["from_minute"] for w in windows], values, marker="o", label=key)
    latency_axis.set_ylabel("chat seconds")
    latency_axis.set_xlabel("minutes")
    latency_axis.legend(loc="upper left", fontsize="small")
    latency_axis.grid(alpha=0.3)
    plan, verdict = document["plan"], "passed" if document["passed"] else "FAILED"
    figure.suptitle(f"soak: {plan['users']} users, {plan['minutes']:g} min, {verdict}")
    figure.tight_layout()
    figure.savefig(target, dpi=80)
    plt.close(figure)


def write(document: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    """Writes the result file and its plot beside it; returns the result file."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"soak-{stamp}.json"
    target.write_text(json.dumps({"recorded_at": stamp, **document}, indent=1) + "\n")
    plot(document, target.with_suffix(".png"))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    defaults = SoakPlan()
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--users", type=int, default=defaults.users)
    parser.add_argument("--window-minutes", type=float, default=defaults.window_minutes)
    parser.add_argument("--sample-seconds", type=float, default=defaults.sample_seconds)
    parser.add_argument("--step-seconds", type=float, default=defaults.step_seconds)
    parser.add_argument("--cycle-seconds", type=float, default=defaults.cycle_seconds)
    arguments = parser.parse_args()
    plan = SoakPlan(**{key: value for key, value in vars(arguments).items()})
    machine = machine_info()  # its load average before the soak loads it
    with tempfile.TemporaryDirectory(prefix="agentmesh-soak-") as scratch:
        document = {**asyncio.run(soak(plan, Path(scratch))), "machine": machine}
    target = write(document)
    summary = {key: document[key] for key in ("passed", "verdicts", "chats", "max_p99_drift")}
    print(json.dumps(summary, indent=2))
    print(f"written to {target} (plot: {target.with_suffix('.png').name})")
    raise SystemExit(0 if document["passed"] else 1)


if __name__ == "__main__":
    main()
