"""The `agentmesh` command line."""
