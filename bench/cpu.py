"""CPU time spent per call, by process, from /proc: where a chat's cost lands (which service,
PostgreSQL, the client), independent of how busy the machine is with other work."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.stats import Call

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def postgres_pids(port: int) -> list[int]:
    """The postmaster listening on `port` and its children (backends, writers)."""
    postmaster = None
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        if command[0].endswith(b"postgres") and f" -p {port} ".encode() in b" ".join([b"", *command, b""]):
            postmaster = pid
    if postmaster is None:
        return []
    return [postmaster, *(pid for pid, parent in parents.items() if parent == postmaster)]


async def cpu_per_call(
    call: Call, count: int, processes: Mapping[str, Sequence[int]], *, postgres_port: int | None = None
) -> dict[str, float]:
    """Milliseconds of CPU per call, for each named group of processes (plus `postgres` when its
    port is given, and `client`: this process), over `count` calls made one after another."""
    groups = {name: list(pids) for name, pids in processes.items()}
    groups["client"] = [os.getpid()]
    if postgres_port is not None:
        groups["postgres"] = postgres_pids(postgres_port)
    before = {name: {pid: cpu_seconds(pid) for pid in pids} for name, pids in groups.items()}
    for _ in range(count):
        await call()
    if postgres_port is not None:  # backends opened meanwhile count from zero
        groups["postgres"] = postgres_pids(postgres_port)
    out = {
        name: sum(cpu_seconds(pid) - before[name].get(pid, 0.0) for pid in pids) / count * 1000
        for name, pids in groups.items()
    }
    out = {name: round(value, 3) for name, value in out.items()}
    out["total"] = round(sum(out.values()), 3)
    return out
