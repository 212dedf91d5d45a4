"""`python -m bench.chaos [--minutes 10] [--seed N]`: chats under load while a seeded random
schedule kills and stalls parts of the mesh — the mesh as processes on PostgreSQL with two
executors and two gateways, at the fault tests' two-second leases.

Every `--fault-every` seconds (give or take half) one fault starts, or two at once (one time in
four), each on a part no other fault holds: an executor SIGKILLed (started again after 2 to 5 s) or
SIGSTOPped (3 to 8 s), a gateway SIGKILLed (started again after 2 s), memory or the registry
SIGKILLed (1 to 3 s), PostgreSQL restarted (`pg_ctl restart -m immediate`). Chats keep coming
meanwhile through both gateways: streamed ones to a coordinator that delegates, unary ones to its
worker, each in a session of its own.

Once the schedule ends and every part is back, it checks from the services' public APIs and the
log: every chat answered or failed with a clear error (never INTERNAL or UNKNOWN); every
acknowledged message in its session's log; exactly one end per run and one response per
delegation, `seq` gap-free; no agent working and no run leased or holding its session's turn in
the registry. The same seed makes the same schedule.

Writes `bench/results/chaos-<UTC time>.json`: `passed`, the seed, every fault with its time, what
the chats saw in all and around each kind of fault, and what broke the invariants, if anything."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from bench.report import RESULTS_DIR, machine_info
from tests.e2e.harness import ServiceProcess
from tests.faults.load import OUTAGE_CODES, ChatLoad, Outcome, chat_load, problems
from tests.faults.processes import Processes
from tests.polling import eventually
from tests.postgres import PostgresServer, PostgresUnavailable, find_bin_dir

# A worker answer of about a second (10 chunks, 0.1 s apart), so faults land mid-run.
WORKER = {"content": "part " * 120, "delay_seconds": 0.1}
KINDS = ("kill executor", "stop executor", "kill gateway", "kill memory", "kill registry", "restart postgres")


@dataclass(frozen=True)
class ChaosPlan:
    minutes: float = 10.0
    seed: int = 0  # 0: a fresh one, recorded
    fault_every_seconds: float = 15.0
    chats_per_second: float = 4.0


@dataclass
class Fault:
    at: float  # seconds since the load began
    kind: str
    target: str
    down_seconds: float


class Chaos:
    """The schedule and the parts it acts on."""

    def __init__(self, mesh: Processes, postgres: PostgresServer, rng: random.Random) -> None:
        self._mesh = mesh
        self._postgres = postgres
        self._rng = rng
        self._held: set[str] = set()
        self.faults: list[Fault] = []
        self._tasks: list[asyncio.Task[None]] = []

    def targets(self, kind: str) -> list[str]:
        if kind in ("kill executor", "stop executor"):
            # One executor is always left serving: the other takes over what the first held.
            if any(name.startswith("executor") for name in self._held):
                return []
            return list(self._mesh.executors)
        if kind == "kill gateway":
            return [p.name for p in (self._mesh.gateway, *self._mesh.extra) if p.name not in self._held][:1]
        name = kind.split()[-1]
        return [] if name in self._held else [name]

    def strike(self, began: float) -> None:
        """Starts one fault, or two at once, on parts nobody else holds."""
        for kind in self._rng.sample(KINDS, 2 if self._rng.random() < 0.25 else 1):
            targets = self.targets(kind)
            if not targets:
                continue
            target = self._rng.choice(targets)
            down = {
                "kill executor": self._rng.uniform(2, 5),
                "stop executor": self._rng.uniform(3, 8),
                "kill gateway": 2.0,
                "restart postgres": 0.0,
            }.get(kind, self._rng.uniform(1, 3))
            fault = Fault(round(time.monotonic() - began, 2), kind, target, round(down, 2))
            self.faults.append(fault)
            self._held.add(target)
            print(f"{fault.at:7.1f} s  {kind} {target} for {fault.down_seconds:g} s", flush=True)
            if kind == "restart postgres":
                # pg_ctl runs in this thread: forked from another one, next to gRPC's threads, it
                # crashed (tests/faults/test_postgres_restart.py).
                self._postgres.restart()
                self._held.discard(target)
            else:
                self._tasks.append(asyncio.create_task(self._fault(fault)))

    async def settle(self) -> None:
        """Until every fault ended and its part is back."""
        await asyncio.gather(*self._tasks)

    async def _fault(self, fault: Fault) -> None:
        process = self._process(fault.target)
        try:
            if fault.kind == "stop executor":
                assert process.pid is not None
                os.kill(process.pid, signal.SIGSTOP)
                await asyncio.sleep(fault.down_seconds)
                os.kill(process.pid, signal.SIGCONT)
            else:
                await process.kill()
                await asyncio.sleep(fault.down_seconds)
                await process.start()
        finally:
            self._held.discard(fault.target)

    def _process(self, name: str) -> ServiceProcess:
        return next(p for p in self._mesh.services if p.name == name)


async def chaos(plan: ChaosPlan, log_dir: Path) -> dict[str, Any]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable("no PostgreSQL binaries: the chaos run restarts a server of its own")
    postgres = PostgresServer(bin_dir, durable=True)  # a crash must not lose acknowledged commits
    postgres.start()
    mesh = Processes(postgres.url, log_dir)
    try:
        await mesh.start()
        await mesh.add_gateway("gateway-2")
        return await _run(plan, mesh, postgres)
    finally:
        with contextlib.suppress(Exception):
            await mesh.stop()
        postgres.stop()


async def _run(plan: ChaosPlan, mesh: Processes, postgres: PostgresServer) -> dict[str, Any]:
    rng = random.Random(plan.seed)
    schedule = Chaos(mesh, postgres, rng)
    async with (
        chat_load(mesh, "chaos", worker=[WORKER]) as first_load,
        grpc.aio.insecure_channel(mesh.extra[0].grpc_address) as second_gateway,
    ):
        loads = (first_load, first_load.through(gw_grpc.GatewayServiceStub(second_gateway), "chaos-2"))
        began = time.monotonic()
        ends = began + plan.minutes * 60
        started: list[tuple[float, Outcome]] = []
        next_fault = began + rng.uniform(0.5, 1.5) * plan.fault_every_seconds
        while time.monotonic() < ends:
            for outcome in loads[len(started) % 2].start(1):
                started.append((time.monotonic() - began, outcome))
            if time.monotonic() >= next_fault:
                schedule.strike(began)
                next_fault = time.monotonic() + rng.uniform(0.5, 1.5) * plan.fault_every_seconds
            await asyncio.sleep(1 / plan.chats_per_second)
        await schedule.settle()
        for load in loads:
            await load.finish()
        found = await _settled_problems(mesh, first_load, [o for _, o in started])
    return _report(plan, schedule.faults, started, found)


async def _settled_problems(mesh: Processes, load: ChatLoad, outcomes: list[Outcome]) -> list[str]:
    """What still breaks the invariants after the mesh had two minutes to settle."""

    async def holds() -> bool:
        with contextlib.suppress(Exception):
            return await problems(mesh, load.http, load.project_id, outcomes) == []
        return False

    with contextlib.suppress(AssertionError):
        await eventually(holds, timeout=120, what="the mesh settles")
    return await problems(mesh, load.http, load.project_id, outcomes)


def _seen(outcome: Outcome) -> str:
    if outcome.error is not None:
        return outcome.error.code().name
    return outcome.final or "nothing"


def _report(
    plan: ChaosPlan, faults: list[Fault], started: list[tuple[float, Outcome]], found: list[str]
) -> dict[str, Any]:
    unclear = [
        f"{o.session_id}: {o.error.code().name} {o.error.details()!r}"
        for _, o in started
        if o.error is not None and o.error.code() not in OUTAGE_CODES
    ]
    around: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for fault in faults:
        for at, outcome in started:
            if fault.at - 5 <= at <= fault.at + fault.down_seconds + 5:
                around[fault.kind][_seen(outcome)] += 1
    return {
        "plan": asdict(plan),
        "passed": not found and not unclear,
        "faults_by_kind": dict(collections.Counter(f.kind for f in faults)),
        "chats": len(started),
        "acknowledged": sum(o.acknowledged for _, o in started),
        "outcomes": dict(collections.Counter(_seen(o) for _, o in started)),
        "outcomes_around_each_kind": {kind: dict(seen) for kind, seen in around.items()},
        "unclear_errors": unclear[:50],
        "problems": found[:200],
        "faults": [asdict(f) for f in faults],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    defaults = ChaosPlan()
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--seed", type=int, default=0, help="the schedule's seed (default: a fresh one)")
    parser.add_argument("--fault-every", type=float, default=defaults.fault_every_seconds, dest="fault_every")
    parser.add_argument("--chats-per-second", type=float, default=defaults.chats_per_second)
    parser.add_argument("--log-dir", type=Path, help="keep the services' logs here (default: thrown away)")
    arguments = parser.parse_args()
    plan = ChaosPlan(
        minutes=arguments.minutes,
        seed=arguments.seed or random.SystemRandom().randrange(1, 2**31),
        fault_every_seconds=arguments.fault_every,
        chats_per_second=arguments.chats_per_second,
    )
    print(f"seed {plan.seed}", flush=True)
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="agentmesh-chaos-") as scratch:
        log_dir = arguments.log_dir or Path(scratch)
        document = {**asyncio.run(chaos(plan, log_dir)), "machine": machine}
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    target = RESULTS_DIR / f"chaos-{stamp}.json"
    target.write_text(json.dumps({"recorded_at": stamp, **document}, indent=1) + "\n")
    summary = {key: document[key] for key in ("passed", "faults_by_kind", "chats", "outcomes")}
    print(json.dumps(summary, indent=2))
    for problem in document["unclear_errors"] + document["problems"][:40]:
        print(problem)
    print(f"written to {target}")
    raise SystemExit(0 if document["passed"] else 1)


if __name__ == "__main__":
    main()
