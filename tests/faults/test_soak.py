"""The soak (bench/soak.py) in its three-minute version: the mesh as processes on PostgreSQL under
steady streaming chats with delegation and a tool, sampled throughout. What the suite holds it
to is what no noisy neighbour changes — no chat failed, the registry's books settle, no process
logged an error line, every process sampled every time, the result file and its plot written.
Its resource growth and latency drift are reported here and judged by `make soak` (an hour),
where the windows are long enough to mean something: latency is the benchmarks' business, never
a test's assert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import RESOURCES, SoakPlan, soak_on, write

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(420), pytest.mark.long(195)]

SHORT = SoakPlan(minutes=3, users=10, window_minutes=1, sample_seconds=5, step_seconds=0.5, cycle_seconds=6)


async def test_three_minutes_of_chats_fail_none_and_leave_nothing_behind(
    postgres_database: str, tmp_path: Path
) -> None:
    document = await soak_on(postgres_database, SHORT, tmp_path / "logs")
    print(json.dumps({key: document[key] for key in ("verdicts", "chats", "max_p99_drift", "growth")}))

    assert document["failed_chats"] == 0, document["failures"]
    assert document["chats"] >= SHORT.users * 10, "every user kept chatting for the whole soak"
    assert document["verdicts"]["books_settled"], "an agent working or a run leased after the load"
    assert document["error_lines"] == []
    processes = {"registry", "memory", "executor-0", "executor-1", "gateway"}
    assert len(document["series"]) >= 30
    for sample in document["series"]:
        assert {name for name in sample if name != "at"} == processes
        assert all(sample[name][resource] > 0 for name in processes for resource in RESOURCES), sample
    assert [w["chats"] > 0 for w in document["windows"]] == [True] * 3

    written = write(document, tmp_path)
    assert json.loads(written.read_text())["passed"] == document["passed"]
    assert written.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
