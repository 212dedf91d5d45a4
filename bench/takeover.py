"""`python -m bench.takeover [--kills N]`: what an executor's death costs a run — the
mesh as processes on PostgreSQL (two executors, a 2 s run lease, as the fault tests run it), one
chat at a time whose model step takes about two seconds; its executor is SIGKILLed half a second
into the run and started again afterwards.

Figures, from the session log's timestamps (the memory service's clock) and the client's clock
at the kill (one host):
- `takeover_seconds`: from the SIGKILL to the surviving executor recording `RUN_RESUMED` — the
  lease running out, the registry's sweep, and the survivor's next renewal taking the orphan;
- `resume_overhead_seconds`: how much longer the resumed run took, from `RUN_RESUMED` to its
  answer, than the same step takes in a run nobody killed (its input to its answer; median of
  the unkilled runs measured first). Resolving the agent and reading its conversation back from
  the log happen before `RUN_RESUMED` is recorded, so they are counted in `takeover_seconds`;
- `delay_seconds`: what the client feels — how much later the killed chat's answer came than a
  chat nobody killed (input to answer, less the unkilled median).

Writes `bench/results/takeover-<UTC time>.json` and prints p50/p99 of each."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from bench.stats import percentile
from tests.faults.processes import LEASE_SECONDS, Processes, session_log
from tests.mesh import MeshClient, Seeded, bearer
from tests.postgres import fresh_database, postgres_server_url

STEP = {"content": "done", "delay_seconds": 2.0}
KILL_AFTER_SECONDS = 0.5
UNKILLED_RUNS = 3
RESULTS = Path(__file__).parent / "results"


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["created_at"].replace("Z", "+00:00")).timestamp()


def _reason(event: dict[str, Any]) -> str:
    return str((event.get("metadata") or {}).get("reason", ""))


async def _chat(
    gateway: gw_grpc.GatewayServiceStub, agent: Seeded, session_id: str, mesh: Processes | None
) -> float | None:
    """One chat to its end; with `mesh`, SIGKILLs the executor running it first (and starts it
    again after). The client's clock at the kill, if any."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=agent.ref, message="go", session_id=session_id),
        metadata=bearer(agent.token),
        timeout=LEASE_SECONDS * 30,
    )
    killed, killed_at = "", None
    async for response in call:
        event = response.event
        if mesh is not None and event.HasField("run_started") and not killed:
            await asyncio.sleep(KILL_AFTER_SECONDS)
            killed = event.run_started.executor_id
            killed_at = time.time()
            await mesh.executors[killed].kill()
        if event.HasField("run_failed"):
            raise RuntimeError(f"session {session_id}: the run failed: {event}")
    if killed:
        await mesh.executors[killed].start()
        await mesh.executors[killed].wait_serving()
    return killed_at


async def measure(kills: int, log_dir: Path) -> dict[str, Any]:
    with postgres_server_url() as server:
        async with fresh_database(server) as url:
            mesh = Processes(url, log_dir)
            await mesh.start()
            client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
            try:
                token = await client.login()
                agent = await client.seed_agent(token, name="slow", mock_responses=[STEP])
                gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
                headers = {"Authorization": f"Bearer {token}"}
                http = httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10)
                async with http:
                    fresh = []
                    for number in range(UNKILLED_RUNS):
                        await _chat(gateway, agent, f"fresh-{number}", None)
                        events = await session_log(http, agent.project_id, f"fresh-{number}")
                        fresh.append(_at(events[-1]) - _at(events[0]))
                    step_seconds = statistics.median(fresh)
                    takeover, overhead, delay = [], [], []
                    for number in range(kills):
                        session_id = f"killed-{number}"
                        killed_at = await _chat(gateway, agent, session_id, mesh)
                        events = await session_log(http, agent.project_id, session_id)
                        resumed = [e for e in events if _reason(e) == "RUN_RESUMED"]
                        if killed_at is None or not resumed:
                            continue  # the run ended before the kill landed
                        takeover.append(_at(resumed[0]) - killed_at)
                        overhead.append(_at(events[-1]) - _at(resumed[0]) - step_seconds)
                        delay.append(_at(events[-1]) - _at(events[0]) - step_seconds)
                        print(
                            f"kill {number + 1}: takeover {takeover[-1]:.2f} s, overhead {overhead[-1]:.3f} s"
                        )
            finally:
                await client.close()
                await mesh.stop()

    def summary(values: list[float]) -> dict[str, float | None]:
        return {
            "p50": percentile(values, 50) if values else None,
            "p99": percentile(values, 99) if values else None,
            "n": len(values),
        }

    return {
        "lease_seconds": LEASE_SECONDS,
        "step_seconds": step_seconds,
        "takeover_seconds": summary(takeover),
        "resume_overhead_seconds": summary(overhead),
        "delay_seconds": summary(delay),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.takeover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="executor deaths to measure (default 10)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentmesh-takeover-") as scratch:
        figures = asyncio.run(measure(arguments.kills, Path(scratch)))
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    figures["recorded_at"] = stamp
    RESULTS.mkdir(exist_ok=True)
    target = RESULTS / f"takeover-{stamp}.json"
    target.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    print(f"written to {target}")


if __name__ == "__main__":
    main()
