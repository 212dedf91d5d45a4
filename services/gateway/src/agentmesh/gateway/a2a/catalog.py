"""The gateway's discovery index: the agents their owners published, in two documents a client
given only the gateway's address can read (docs/a2a.md, "Discovery").

- `/.well-known/ai-catalog.json`: an AI Catalog (`application/ai-catalog+json`, the registry
  format the A2A working group points to), one entry per public agent whose `url` is the agent's
  card.
- `/.well-known/agent-card.json`: the gateway's own A2A agent card, as A2A's well-known URI
  requires an AgentCard there. The gateway is no agent (nothing answers messages at its root), so
  the card names no interface; its skills are the public agents (skill id `{project}/{agent}`)
  and its `ai-catalog` extension carries the catalog itself, so an A2A client that reads only
  agent cards finds every agent's card URL in one fetch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.types import a2a_pb2
from google.protobuf import struct_pb2

from agentmesh.gateway.a2a.card import CARD_PATH, agent_url
from agentmesh.gateway.version import VERSION
from agentmesh.registry.v1 import resources_pb2

CATALOG_PATH = "/.well-known/ai-catalog.json"
CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
# The AI Catalog release this document follows (v0.9.0, the first public one).
CATALOG_SPEC_VERSION = "0.9"
CATALOG_EXTENSION_URI = "https://ai-catalog.io/spec"
AGENT_CARD_MEDIA_TYPE = "application/a2a-agent-card+json"


def ai_catalog(specs: Sequence[resources_pb2.AgentSpec], *, base_url: str) -> dict[str, Any]:
    """The AI Catalog of the public agents: one entry each, pointing at its public card."""
    return {
        "specVersion": CATALOG_SPEC_VERSION,
        "host": {"displayName": "agentmesh", "identifier": base_url},
        "entries": [_entry(spec, base_url) for spec in specs],
    }


def _entry(spec: resources_pb2.AgentSpec, base_url: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "identifier": f"urn:agentmesh:agent:{spec.project_slug}:{spec.agent.slug}",
        "displayName": spec.agent.name,
        "mediaType": AGENT_CARD_MEDIA_TYPE,
        "url": _card(spec, base_url),
    }
    if spec.description:
        entry["description"] = spec.description
    if spec.expertise:
        entry["tags"] = list(spec.expertise)
    return entry


def gateway_card(specs: Sequence[resources_pb2.AgentSpec], *, base_url: str) -> a2a_pb2.AgentCard:
    """The gateway's own card: a catalog of the public agents (see the module docstring)."""
    catalog = struct_pb2.Struct()
    catalog.update(ai_catalog(specs, base_url=base_url))
    skills = [
        a2a_pb2.AgentSkill(
            id=f"{spec.project_slug}/{spec.agent.slug}",
            name=spec.agent.name,
            description=spec.description or f"agent {spec.agent.name}",
            tags=list(spec.expertise) or ["agent"],
        )
        for spec in specs
    ]
    return a2a_pb2.AgentCard(
        name="agentmesh",
        description=(
            "The agents this agentmesh gateway publishes: each skill is one of them (id"
            " `{project}/{agent}`), and the ai-catalog extension lists their cards' URLs. The gateway"
            " itself answers no messages; talk to an agent at the interfaces its own card names."
        ),
        provider=a2a_pb2.AgentProvider(organization="agentmesh", url=base_url),
        version=VERSION,
        capabilities=a2a_pb2.AgentCapabilities(
            streaming=False,
            push_notifications=True,
            extended_agent_card=False,
            extensions=[
                a2a_pb2.AgentExtension(
                    uri=CATALOG_EXTENSION_URI,
                    description=f"the public agents as an AI Catalog (also at {base_url}{CATALOG_PATH})",
                    required=False,
                    params=catalog,
                )
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


def _card(spec: resources_pb2.AgentSpec, base_url: str) -> str:
    return agent_url(spec, base_url) + CARD_PATH
