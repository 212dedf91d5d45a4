"""`python -m agentmesh.registry`: the registry alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.runtime import eventloop

eventloop.prepare_process()  # before grpc is imported

from agentmesh.registry.app import start  # noqa: E402
from agentmesh.registry.settings import RegistrySettings  # noqa: E402
from agentmesh.runtime.service import run_service  # noqa: E402

if __name__ == "__main__":
    run_service("registry", RegistrySettings, start)
