"""`python -m agentmesh.memory`: the memory alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.memory.app import start
from agentmesh.memory.settings import MemorySettings
from agentmesh.runtime.service import run_service

if __name__ == "__main__":
    run_service("memory", MemorySettings, start)
