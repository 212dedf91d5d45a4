"""`python -m agentmesh.registry`: the registry alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.registry.app import start
from agentmesh.registry.settings import RegistrySettings
from agentmesh.runtime.service import run_service

if __name__ == "__main__":
    run_service("registry", RegistrySettings, start)
