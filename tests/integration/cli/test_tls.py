"""The CLI reaches a gateway serving TLS: `agentmesh login` and the commands after it
dial an `https://` gateway address over TLS, checking the certificate against a private CA given
with `--ca-file` or `AGENTMESH_TLS_CA_FILE`; with a CA a bare host:port is dialled over TLS too;
without the CA the certificate is not trusted and the command says it cannot reach the mesh.
Each command runs as a real process against an in-process mesh whose every port serves TLS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from agentmesh.cli.mesh import SERVICES, Mesh, start_mesh
from tests.certificates import CertificateAuthority
from tests.integration.cli.support import cli
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient

SIGN_IN = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "pki")


@pytest.fixture
async def tls_mesh(tmp_path: Path, ca: CertificateAuthority) -> AsyncIterator[Mesh]:
    """A mesh serving TLS on every port (client certificates not required, as on a public
    gateway), its services dialling each other over TLS."""
    served = ca.issue("agentmesh-services")
    tls = {"tls_cert_file": served.cert_file, "tls_key_file": served.key_file, "tls_ca_file": ca.ca_file}
    extra: dict[str, dict[str, object]] = {name: dict(tls) for name in SERVICES}
    extra["registry"].update(superuser_email=SUPERUSER_EMAIL, superuser_password=SUPERUSER_PASSWORD)
    mesh = await start_mesh(
        data_dir=tmp_path / "mesh",
        grpc_port=0,
        http_port=0,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'mesh.db'}",
        jwt_secret=JWT_SECRET,
        extra=extra,
    )
    yield mesh
    await mesh.stop(grace_seconds=1)


async def test_login_and_chat_reach_an_https_gateway_with_a_private_ca(
    tls_mesh: Mesh, ca: CertificateAuthority, tmp_path: Path
) -> None:
    client = MeshClient(
        tls_mesh.services["registry"].address,
        tls_mesh.gateway.address,
        tls=grpc.ssl_channel_credentials(root_certificates=ca.ca_file.read_bytes()),
    )
    try:
        seeded = await client.seed_agent(await client.login(), mock_responses=["over TLS"])
    finally:
        await client.close()
    gateway = f"https://{tls_mesh.gateway.address}"
    config = tmp_path / "config"

    code, output = await cli(
        "--ca-file", str(ca.ca_file), "login", "--gateway", gateway, config=config, env=SIGN_IN
    )
    assert code == 0, output
    assert f"signed in to {gateway}" in output

    # Signed in by the kept login (refreshed over TLS); the CA comes from the environment this time.
    code, output = await cli(
        "chat",
        seeded.ref,
        "hello",
        "--gateway",
        gateway,
        config=config,
        env={"AGENTMESH_TLS_CA_FILE": str(ca.ca_file)},
    )
    assert code == 0, output
    assert f"{seeded.ref}: over TLS" in output

    # A bare host:port is dialled over TLS once a CA is given.
    code, output = await cli(
        "--ca-file",
        str(ca.ca_file),
        "chat",
        seeded.ref,
        "hi",
        "--gateway",
        tls_mesh.gateway.address,
        config=config,
        env=SIGN_IN,
    )
    assert code == 0, output
    assert f"{seeded.ref}: over TLS" in output


async def test_an_untrusted_certificate_or_a_bad_ca_file_is_a_clear_error(
    tls_mesh: Mesh, tmp_path: Path
) -> None:
    gateway = f"https://{tls_mesh.gateway.address}"
    code, output = await cli("login", "--gateway", gateway, config=tmp_path, env=SIGN_IN)
    assert code == 1
    assert "cannot reach the mesh" in output and "Traceback" not in output

    missing = tmp_path / "no-such-ca.pem"
    code, output = await cli(
        "--ca-file", str(missing), "login", "--gateway", gateway, config=tmp_path, env=SIGN_IN
    )
    assert code != 0 and "Traceback" not in output
