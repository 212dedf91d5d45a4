"""`make bench-smoke` in CI: the benchmark harness (bench/) runs end to end with small counts and
produces every figure. It never checks that anything is fast — a shared CI machine
says nothing about that; `make bench` and bench/results/latest.json do."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from bench.delegation import HOP_IN_NOISE
from bench.report import TARGETS
from tests.e2e.harness import process_environment
from tests.postgres import DATABASE_URL_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.long(41)
@pytest.mark.timeout(420)
async def test_bench_smoke_produces_every_figure(postgres_url: str, tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench",
        "--smoke",
        "--results-dir",
        str(results_dir),
        "--log-dir",
        str(tmp_path / "logs"),
        cwd=REPO,
        # The session's PostgreSQL server: the bench makes its own databases on it.
        env=process_environment({DATABASE_URL_ENV: postgres_url}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 400)
    text = output.decode(errors="replace")
    document = json.loads((results_dir / "latest.json").read_text())

    undefined = {key for key in TARGETS if document["figures"][key] is None}
    # The one figure small counts may leave undefined: its yardstick, the raw chain's extra hop,
    # can measure at or below zero on a busy host — the recorded baseline shows when it did.
    if document["baselines"]["per_hop_ms"] <= 0 and HOP_IN_NOISE in document["missing"].get(
        "delegation_hop_ratio", ""
    ):
        undefined.discard("delegation_hop_ratio")
        produced = {key: value for key, value in document["figures"].items() if key != "delegation_hop_ratio"}
    else:
        produced = document["figures"]
    missing = {key: document["missing"].get(key, "?") for key in undefined}
    assert not missing, f"figures not produced: {json.dumps(missing, indent=2)}\n{text[-4000:]}"
    assert process.returncode == 0, text[-4000:]
    assert set(document) >= {"machine", "figures", "baselines"}
    assert list(document["figures"]) == list(TARGETS)
    assert all(isinstance(value, int | float) for value in produced.values())
    assert document["baselines"]["chain_p50_ms"] > 0
    # The floors the figures are read against: a chat's, and each append shape's.
    assert document["details"]["floor"]["chat_p50_ratio_to_floor"] > 0
    floors = document["details"]["appends"]["floor"]
    assert set(floors) == {"single", "concurrent_16", "batched_100"}
    assert all(shape["floor_ratio"] > 0 and shape["mesh_over_floor"] > 0 for shape in floors.values())
    # The tenants section measured under attack: every kind of hostile load was made (served or
    # refused, as the mesh decides).
    hostile = document["details"]["tenants"]["hostile"]
    assert all(
        hostile[kind]["completed"] + hostile[kind]["errors"] > 0 for kind in ("fanout", "streams", "reads")
    )
