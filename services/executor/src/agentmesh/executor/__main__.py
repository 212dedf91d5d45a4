"""`python -m agentmesh.executor`: the executor alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.executor.app import start
from agentmesh.executor.settings import ExecutorSettings
from agentmesh.runtime.service import run_service

if __name__ == "__main__":
    run_service("executor", ExecutorSettings, start)
