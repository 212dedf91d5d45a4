"""`python -m agentmesh.gateway`: one gateway, as a container runs it."""

from agentmesh.cli.serve import serve_main

if __name__ == "__main__":
    serve_main("gateway")
