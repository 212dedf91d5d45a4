"""`python -m agentmesh.memory`: the memory alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.runtime import eventloop

eventloop.prepare_process()  # before grpc is imported

from agentmesh.memory.app import start  # noqa: E402
from agentmesh.memory.settings import MemorySettings  # noqa: E402
from agentmesh.runtime.service import run_service  # noqa: E402

if __name__ == "__main__":
    run_service("memory", MemorySettings, start)
