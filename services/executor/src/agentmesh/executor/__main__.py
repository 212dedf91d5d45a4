"""`python -m agentmesh.executor`: the executor alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.runtime import eventloop

eventloop.prepare_process()  # before grpc is imported

from agentmesh.executor.app import start  # noqa: E402
from agentmesh.executor.settings import ExecutorSettings  # noqa: E402
from agentmesh.runtime.service import run_service  # noqa: E402

if __name__ == "__main__":
    run_service("executor", ExecutorSettings, start)
