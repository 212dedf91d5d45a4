"""A whole mesh in this process, each service its own gRPC server on a loopback port."""

from __future__ import annotations

import pytest

from agentmesh.cli.mesh import Mesh, start_mesh
from tests.mesh import JWT_SECRET, STEADY_LEASE, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient


@pytest.fixture
async def mesh(database_url: str, tmp_path) -> Mesh:
    started = await start_mesh(
        data_dir=tmp_path,
        grpc_port=0,
        http_port=0,
        database_url=database_url,
        jwt_secret=JWT_SECRET,
        extra={
            "registry": {
                "superuser_email": SUPERUSER_EMAIL,
                "superuser_password": SUPERUSER_PASSWORD,
                **STEADY_LEASE,
            },
            # The suite registers its users from one address, more than the default allows.
            "gateway": {"executor_health_interval_seconds": 0.2, "registration_max_per_address": 0},
        },
    )
    yield started
    await started.stop(grace_seconds=1)


@pytest.fixture
async def client(mesh: Mesh) -> MeshClient:
    client = MeshClient(mesh.services["registry"].address, mesh.gateway.address)
    yield client
    await client.close()
