"""The event loop a service process runs on: uvloop when it is installed (a pinned dependency of
the runtime), else asyncio's own. uvloop measured 10-25 % cheaper per grpc.aio stream
message with many in flight (this mesh's A/B: docs/decisions/0014-uvloop-in-every-service.md).
`AGENTMESH_UVLOOP=0` turns it off (for that A/B, or to rule it out when debugging).

A service process calls `prepare_process()` before anything imports grpc: uvloop starts
subprocesses (stdio MCP servers) with fork() rather than vfork(), which runs gRPC's fork handlers;
with other threads inside gRPC they are skipped half-way, and about one child in seven died before
it could exec (docs/decisions/0020-grpc-fork-handlers-off.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

UVLOOP_ENV = "AGENTMESH_UVLOOP"
GRPC_FORK_SUPPORT_ENV = "GRPC_ENABLE_FORK_SUPPORT"


def prepare_process() -> None:
    """Turns gRPC's fork handlers off (unless the environment says otherwise): a service only
    forks to exec another program at once, which needs none of them. gRPC reads the setting when
    it is imported, so this runs first."""
    os.environ.setdefault(GRPC_FORK_SUPPORT_ENV, "false")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default) when it is off or not installed."""
    if os.environ.get(UVLOOP_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
