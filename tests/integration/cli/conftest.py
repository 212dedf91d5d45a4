"""CLI commands against a whole in-process mesh (the `mesh` fixture), on each database backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh.cli.client import Connection, Credentials, connect
from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import RecordingRegistry
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD


@pytest.fixture
def registry_address(mesh: Mesh) -> str:
    return mesh.services["registry"].address


@pytest.fixture
async def admin(registry_address: str) -> AsyncIterator[Connection]:
    """A connection signed in as the mesh's bootstrap superuser, through the CLI's own helper."""
    async with connect(registry_address, Credentials(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)) as connection:
        yield connection


@pytest.fixture
def recording(admin: Connection) -> RecordingRegistry:
    """The superuser's registry client, recording every write it makes."""
    return RecordingRegistry(admin.channel)
