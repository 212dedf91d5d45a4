"""TLS and mutual TLS from settings, on every gRPC and HTTP port of the mesh.

A throwaway CA signs one certificate the services share (it names 127.0.0.1); each service serves
with it, requires client certificates the CA signed, and presents it on its own calls. The mesh
works — a delegation-free chat goes gateway → executor → registry and memory over mutual TLS —
while a plaintext client, and a TLS client without a client certificate, are refused on every port.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.cli.mesh import SERVICES, Mesh, start_mesh
from agentmesh.runtime.health import check_health
from agentmesh.runtime.tls import TlsFiles
from tests.certificates import CertificateAuthority, IssuedCertificate
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient

GRPC_PORTS = ("registry", "memory", "executor", "gateway")


class Pki:
    """The CA and the certificates of one test."""

    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority(directory)
        self.services = self.ca.issue("agentmesh-services")
        self.client = self.ca.issue("a-client")
        # Signed by a CA the mesh does not trust.
        self.stranger = CertificateAuthority(directory / "other", name="another CA").issue("stranger")

    def channel_credentials(self, identity: IssuedCertificate | None) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca.ca_file.read_bytes(),
            private_key=identity.key_file.read_bytes() if identity else None,
            certificate_chain=identity.cert_file.read_bytes() if identity else None,
        )

    def ssl_context(self, identity: IssuedCertificate | None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.ca_file))
        if identity is not None:
            context.load_cert_chain(str(identity.cert_file), str(identity.key_file))
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path / "pki")


@pytest.fixture
async def mtls_mesh(database_url: str, tmp_path: Path, pki: Pki) -> AsyncIterator[Mesh]:
    tls = {
        "tls_cert_file": pki.services.cert_file,
        "tls_key_file": pki.services.key_file,
        "tls_ca_file": pki.ca.ca_file,
        "tls_require_client_cert": True,
    }
    extra = {name: dict(tls) for name in SERVICES}
    extra["registry"].update(superuser_email=SUPERUSER_EMAIL, superuser_password=SUPERUSER_PASSWORD)
    extra["gateway"]["executor_health_interval_seconds"] = 0.2
    mesh = await start_mesh(
        data_dir=tmp_path / "mesh",
        grpc_port=0,
        http_port=0,
        database_url=database_url,
        jwt_secret=JWT_SECRET,
        extra=extra,
    )
    yield mesh
    await mesh.stop(grace_seconds=1)


async def _health(address: str, credentials: grpc.ChannelCredentials | None) -> int:
    channel = (
        grpc.aio.insecure_channel(address)
        if credentials is None
        else grpc.aio.secure_channel(address, credentials)
    )
    async with channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return reply.status


async def test_the_mesh_works_over_mutual_tls(mtls_mesh: Mesh, pki: Pki) -> None:
    client = MeshClient(
        mtls_mesh.services["registry"].address,
        mtls_mesh.gateway.address,
        tls=pki.channel_credentials(pki.client),
    )
    try:
        token = await client.login()
        seeded = await client.seed_agent(token, mock_responses=["over mutual TLS"])
        events = [response.event for response in await client.stream_chat(seeded, "hello")]
    finally:
        await client.close()
    assert events[-1].WhichOneof("kind") == "run_completed", events[-1]
    assert events[-1].run_completed.content == "over mutual TLS"

    http = mtls_mesh.gateway.http
    assert http.url.startswith("https://")
    async with httpx.AsyncClient(verify=pki.ssl_context(pki.client)) as web:
        response = await web.get(f"{http.url}/healthz")
    assert response.status_code == 200

    tls = TlsFiles(cert_file=pki.client.cert_file, key_file=pki.client.key_file, ca_file=pki.ca.ca_file)
    for name in GRPC_PORTS:
        assert await check_health(mtls_mesh.services[name].address, tls=tls) == "SERVING", name


async def test_plaintext_and_certificateless_clients_are_refused_on_every_port(
    mtls_mesh: Mesh, pki: Pki
) -> None:
    refusals = {
        "plaintext": None,
        "TLS without a client certificate": pki.channel_credentials(None),
        "a client certificate of another CA": pki.channel_credentials(pki.stranger),
    }
    for name in GRPC_PORTS:
        address = mtls_mesh.services[name].address
        assert (
            await _health(address, pki.channel_credentials(pki.client))
            == health_pb2.HealthCheckResponse.SERVING
        )
        for how, credentials in refusals.items():
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _health(address, credentials)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, (name, how)

    https = mtls_mesh.gateway.http.url
    http_url = https.replace("https://", "http://", 1)
    async with httpx.AsyncClient() as plain:
        with pytest.raises(httpx.TransportError):
            await plain.get(f"{http_url}/healthz")
    for identity in (None, pki.stranger):
        async with httpx.AsyncClient(verify=pki.ssl_context(identity)) as web:
            with pytest.raises(httpx.TransportError):
                await web.get(f"{https}/healthz")


async def test_half_configured_tls_stops_a_service_with_a_message(tmp_path: Path, pki: Pki) -> None:
    with pytest.raises(ValueError, match="AGENTMESH_TLS_KEY_FILE"):
        TlsFiles(cert_file=pki.services.cert_file)
    with pytest.raises(ValueError, match="AGENTMESH_TLS_CA_FILE"):
        TlsFiles(cert_file=pki.services.cert_file, key_file=pki.services.key_file, require_client_cert=True)
    missing = TlsFiles(cert_file=tmp_path / "nope.pem", key_file=pki.services.key_file)
    with pytest.raises(ValueError, match="AGENTMESH_TLS_CERT_FILE: cannot read"):
        missing.server_credentials()
