"""The version the gateway reports (agent cards, the OpenAPI document): its distribution's."""

from importlib.metadata import version

VERSION = version("agentmesh-gateway")
