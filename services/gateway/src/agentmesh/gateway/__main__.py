"""`python -m agentmesh.gateway`: the gateway alone, as a container runs it (until SIGTERM, then it
drains for `shutdown_grace_seconds`)."""

from agentmesh.gateway.app import start
from agentmesh.gateway.settings import GatewaySettings
from agentmesh.runtime.service import run_service

if __name__ == "__main__":
    run_service("gateway", GatewaySettings, start)
