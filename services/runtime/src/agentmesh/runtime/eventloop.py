"""The event loop a service process runs on: uvloop when it is installed (a pinned dependency of
the runtime), else asyncio's own. uvloop measured 10-25 % cheaper per grpc.aio stream
message with many in flight; docs/performance.md has this mesh's A/B. `AGENTMESH_UVLOOP=0` turns
it off (for that A/B, or to rule it out when debugging)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

UVLOOP_ENV = "AGENTMESH_UVLOOP"


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
