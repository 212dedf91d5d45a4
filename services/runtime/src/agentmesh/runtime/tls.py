"""Transport security from settings: optional TLS, and mutual TLS, on every gRPC and HTTP port.

Off by default (loopback `agentmesh up`). With `tls_cert_file` and `tls_key_file` set a service
serves TLS; with `tls_ca_file` also set it dials its peers over TLS, verifying them against that CA,
and presents its own certificate to them; `tls_require_client_cert` makes its ports refuse any
client without a certificate the CA signed (mutual TLS). One certificate per service serves both
ways: it is the server's identity and, on its calls out, the client's. The files are read once at
start; a missing or unreadable file stops the service with a message naming the setting.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: this service's certificate chain and key, and the CA its peers are checked with."""

    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None
    require_client_cert: bool = False

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("TLS needs both AGENTMESH_TLS_CERT_FILE and AGENTMESH_TLS_KEY_FILE, or neither")
        if self.require_client_cert and (self.ca_file is None or self.cert_file is None):
            raise ValueError(
                "AGENTMESH_TLS_REQUIRE_CLIENT_CERT needs AGENTMESH_TLS_CERT_FILE, AGENTMESH_TLS_KEY_FILE "
                "and AGENTMESH_TLS_CA_FILE (the CA client certificates are checked against)"
            )

    @property
    def serves_tls(self) -> bool:
        return self.cert_file is not None

    @property
    def dials_tls(self) -> bool:
        """Whether calls to peers go over TLS: they do once there is a CA to check peers with."""
        return self.ca_file is not None

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """Credentials for a gRPC server port, or None for plaintext."""
        if self.cert_file is None or self.key_file is None:
            return None
        return grpc.ssl_server_credentials(
            [
                (
                    _read(self.key_file, "AGENTMESH_TLS_KEY_FILE"),
                    _read(self.cert_file, "AGENTMESH_TLS_CERT_FILE"),
                )
            ],
            root_certificates=_read(self.ca_file, "AGENTMESH_TLS_CA_FILE") if self.ca_file else None,
            require_client_auth=self.require_client_cert,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """Credentials for a channel to a peer, or None for plaintext. Presents this service's
        certificate when it has one (what a peer under mutual TLS requires)."""
        if self.ca_file is None:
            return None
        with_identity = self.cert_file is not None and self.key_file is not None
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "AGENTMESH_TLS_CA_FILE"),
            private_key=_read(self.key_file, "AGENTMESH_TLS_KEY_FILE") if with_identity else None,
            certificate_chain=_read(self.cert_file, "AGENTMESH_TLS_CERT_FILE") if with_identity else None,
        )

    def uvicorn_options(self) -> dict[str, object]:
        """The same policy for an HTTP port served by uvicorn."""
        if self.cert_file is None:
            return {}
        options: dict[str, object] = {"ssl_certfile": str(self.cert_file), "ssl_keyfile": str(self.key_file)}
        if self.ca_file is not None:
            options["ssl_ca_certs"] = str(self.ca_file)
        if self.require_client_cert:
            options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        return options


PLAINTEXT = TlsFiles()


def _read(path: Path, setting: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ValueError(f"{setting}: cannot read {path}: {error.strerror}") from None
