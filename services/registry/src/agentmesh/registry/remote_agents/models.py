"""A remote A2A agent as the registry keeps it."""

from __future__ import annotations

from datetime import datetime

from agentmesh.registry.models import Model


class RemoteAgent(Model):
    """A remote A2A agent registered in a project: its agents may name it in their network access
    and delegate to it over A2A. `credential` (a bearer token) is write-only: answers mask it."""

    id: str
    project_id: str
    name: str
    card_url: str
    credential: str = ""
    description: str = ""
    created_at: datetime
