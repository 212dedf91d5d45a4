"""An agent's A2A v1.0 agent card: what it is, its skills, and where each binding reaches it.

The HTTP bindings live under the agent's base URL (`a2a_paths`), absolute URLs; the gRPC binding
is the gateway's public gRPC port as `host:port` (A2A's form for a gRPC address, which a2a-sdk
hands to the client's channel factory as it is), where the interface's `tenant`
(`{project_slug}/{agent_slug}`) names the agent in every request.

The card at the agent's well-known URL is its public card: what its owner publishes (name,
description, expertise, interfaces, security schemes). The extended card, for an authenticated
caller, adds what it is set up with: whom it delegates to and the tools it calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from agentmesh.gateway.version import VERSION
from agentmesh.registry.v1 import resources_pb2

CARD_PATH = "/.well-known/agent-card.json"
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
# Hosts a server binds to listen on every interface: no client can dial them.
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}
BEARER = "bearer"
API_KEY = "apiKey"


@dataclass
class A2AEndpoints:
    """Where the gateway is reached from outside: its public HTTP base URL (empty: the one a
    request came in on) and its gRPC address (`host:port`), known once the servers listen."""

    http_base_url: str = ""
    grpc_address: str = ""


def agent_url(spec: resources_pb2.AgentSpec, base_url: str) -> str:
    """The agent's base URL: its card is at `+ CARD_PATH`, its HTTP bindings below."""
    return f"{base_url.rstrip('/')}/agents/{spec.project_slug}/{spec.agent.slug}"


def agent_card(
    spec: resources_pb2.AgentSpec, *, base_url: str, grpc_address: str, extended: bool = False
) -> a2a_pb2.AgentCard:
    """The card of `spec`'s agent: public, or extended (for an authenticated caller) with whom
    it delegates to and the tools it calls."""
    url = agent_url(spec, base_url)
    tenant = f"{spec.project_slug}/{spec.agent.slug}"
    interfaces = [
        a2a_pb2.AgentInterface(
            url=url + JSONRPC_PATH,
            protocol_binding=TransportProtocol.JSONRPC,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
        a2a_pb2.AgentInterface(
            url=url + REST_PATH,
            protocol_binding=TransportProtocol.HTTP_JSON,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
    ]
    if grpc_address:
        interfaces.append(
            a2a_pb2.AgentInterface(
                url=reachable_grpc_address(grpc_address, base_url),
                protocol_binding=TransportProtocol.GRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
                tenant=tenant,
            )
        )
    card = a2a_pb2.AgentCard(
        name=spec.agent.name,
        description=spec.description or f"agent {spec.agent.name} of project {spec.project_slug}",
        supported_interfaces=interfaces,
        provider=a2a_pb2.AgentProvider(organization="agentmesh", url=base_url),
        version=VERSION,
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=_skills(spec, extended=extended),
    )
    card.security_schemes[BEARER].http_auth_security_scheme.CopyFrom(
        a2a_pb2.HTTPAuthSecurityScheme(
            scheme="Bearer",
            bearer_format="JWT",
            description="an agentmesh access token (POST /api/v1/auth/login)",
        )
    )
    # An API key (long-lived, revocable, scoped) goes in the same header; either scheme will do.
    card.security_schemes[API_KEY].http_auth_security_scheme.CopyFrom(
        a2a_pb2.HTTPAuthSecurityScheme(
            scheme="Bearer",
            bearer_format="amk_",
            description="an agentmesh API key (POST /api/v1/api-keys), sent as the bearer token",
        )
    )
    for scheme in (BEARER, API_KEY):
        card.security_requirements.append(a2a_pb2.SecurityRequirement(schemes={scheme: a2a_pb2.StringList()}))
    return card


def reachable_grpc_address(grpc_address: str, base_url: str) -> str:
    """The gRPC `host:port` a client can dial: as given, unless its host is a wildcard (the port
    was bound on every interface and no public address was set); then the host the client reached
    the HTTP face at, with the gRPC port."""
    host, _, port = grpc_address.rpartition(":")
    reached = urlsplit(base_url).hostname
    if host not in _WILDCARD_HOSTS or not reached:
        return grpc_address
    return f"[{reached}]:{port}" if ":" in reached else f"{reached}:{port}"


def _skills(spec: resources_pb2.AgentSpec, *, extended: bool) -> list[a2a_pb2.AgentSkill]:
    skills = [
        a2a_pb2.AgentSkill(id=_skill_id(topic), name=topic, description=topic, tags=[topic])
        for topic in spec.expertise
    ]
    if extended and spec.network_access:
        skills.append(
            a2a_pb2.AgentSkill(
                id="task_delegation",
                name="task delegation",
                description="hands sub-tasks to: " + ", ".join(spec.network_access),
                tags=["task_delegation"],
            )
        )
    if extended and (spec.tools or spec.mcp_servers):
        tools = [*spec.tools, *(server.name for server in spec.mcp_servers)]
        skills.append(
            a2a_pb2.AgentSkill(
                id="tool_calling",
                name="tool calling",
                description="calls tools: " + ", ".join(tools),
                tags=["tool_calling"],
            )
        )
    if not skills:
        skills.append(
            a2a_pb2.AgentSkill(id="chat", name="chat", description="answers messages", tags=["chat"])
        )
    return skills


def _skill_id(topic: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-") or "skill"
