"""agentmesh: run AI agents as a mesh of gRPC microservices."""

__version__ = "0.1.1"
