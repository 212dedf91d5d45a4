"""gRPC messages per call, per service: what the mesh's processes received and sent.

Every service of the bench's mesh runs with `AGENTMESH_COUNT_MESSAGES_DIR` set
(`agentmesh.runtime.message_counts`), so each counts the messages its servers receive and send,
per method, and writes them on SIGUSR1. Counting is on the server side only: each message of the
mesh is counted once (the client's StreamChat at the gateway, the gateway's Run at the executor,
the executor's appends at memory, and so on). Health checks are left out: they are periodic, not
part of a chat. What else runs in the background (lease renewals, pool refreshes) is counted and
spread over the calls, so measure enough of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

_UNCOUNTED_PREFIX = "/grpc.health."


async def read_counts(pid: int, directory: Path, *, timeout: float = 10.0) -> dict[str, list[int]]:
    """Asks process `pid` for its counts so far (SIGUSR1) and returns them."""
    target = directory / f"{pid}.json"
    target.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = asyncio.get_running_loop().time() + timeout
    while not target.exists():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"process {pid} wrote no message counts to {directory}")
        await asyncio.sleep(0.02)
    return json.loads(target.read_text())


async def messages_per_call(
    call: Callable[[], Awaitable[None]], count: int, pids: Mapping[str, int], directory: Path
) -> dict[str, Any]:
    """Messages (received + sent) per call over `count` sequential calls: `total`, and
    `by_service` and `by_method` (`service /pkg.Service/Method`) broken down."""
    before = {name: await read_counts(pid, directory) for name, pid in pids.items()}
    for _ in range(count):
        await call()
    after = {name: await read_counts(pid, directory) for name, pid in pids.items()}
    by_method: dict[str, float] = {}
    by_service: dict[str, float] = {}
    for name, counts in after.items():
        for method, (received, sent) in counts.items():
            if method.startswith(_UNCOUNTED_PREFIX):
                continue
            was = before[name].get(method, [0, 0])
            per_call = (received - was[0] + sent - was[1]) / count
            if per_call:
                by_method[f"{name} {method}"] = round(per_call, 2)
                by_service[name] = round(by_service.get(name, 0.0) + per_call, 2)
    return {
        "total": round(sum(by_service.values()), 2),
        "by_service": by_service,
        "by_method": dict(sorted(by_method.items())),
    }
