"""`python -m agentmesh.memory`: the memory service alone, as a container runs it (until SIGTERM,
then it drains for `shutdown_grace_seconds`)."""

from agentmesh.cli.serve import serve_main

if __name__ == "__main__":
    serve_main("memory")
