"""The measured mesh counts its gRPC messages (bench/messages.py) into the log directory; these
helpers switch the counting on and read it back for a call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentmesh.runtime.message_counts import COUNT_DIR_ENV
from bench.mesh import SERVICES, Mesh
from bench.messages import messages_per_call


def counting_env(log_dir: Path) -> dict[str, str]:
    """The measured mesh counts its gRPC messages (bench/messages.py) into the log directory."""
    directory = log_dir / "message-counts"
    directory.mkdir(parents=True, exist_ok=True)
    return {COUNT_DIR_ENV: str(directory)}


async def mesh_messages(mesh: Mesh, call: Any, count: int) -> dict[str, Any]:
    directory = Path(mesh.processes["gateway"].env[COUNT_DIR_ENV])
    pids = {service: mesh.pid(service) for service in SERVICES}
    return await messages_per_call(call, count, pids, directory)
