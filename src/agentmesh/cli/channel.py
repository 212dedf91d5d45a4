"""How the CLI dials a gateway (or registry): plaintext, or TLS.

A gateway serving TLS is named by an `https://` (or `grpcs://`) address — `https://mesh.example.com`
(port 443) or `https://127.0.0.1:50050` — and its certificate is checked against the system's CAs,
or against a private CA given with `--ca-file` / `AGENTMESH_TLS_CA_FILE`. A bare `host:port` is
dialled over TLS when such a CA is given, in plaintext otherwise (`agentmesh up`'s default);
`http://` / `grpc://` force plaintext. The address keeps its scheme wherever the CLI stores it
(`agentmesh login`), so later commands dial it the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import grpc

from agentmesh.cli import options
from agentmesh.runtime.channels import create_channel

TLS_SCHEMES = {"https": 443, "grpcs": 443}
PLAINTEXT_SCHEMES = {"http": 80, "grpc": 80}
CA_FILE_VARIABLE = "AGENTMESH_TLS_CA_FILE"


class ChannelError(ValueError):
    """An address or CA file the CLI cannot dial with; the message says which and why."""


def dial_target(address: str) -> tuple[str, bool | None]:
    """`host:port` to dial and whether the address asks for TLS (None: it does not say)."""
    if "://" not in address:
        return address, None
    parts = urlsplit(address)
    scheme = parts.scheme.lower()
    if scheme not in TLS_SCHEMES and scheme not in PLAINTEXT_SCHEMES:
        raise ChannelError(f"unsupported scheme in {address!r}: use https:// (TLS), http:// or host:port")
    if not parts.hostname:
        raise ChannelError(f"no host in {address!r}")
    default_port = TLS_SCHEMES.get(scheme) or PLAINTEXT_SCHEMES[scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or default_port}", scheme in TLS_SCHEMES


def ca_file() -> Path | None:
    """The private CA to check the gateway's certificate against: `--ca-file`, else the variable."""
    configured = options.ca_file_override or os.environ.get(CA_FILE_VARIABLE)
    return Path(configured) if configured else None


def open_channel(address: str) -> grpc.aio.Channel:
    """A channel to the gateway at `address`, over TLS when the address or a CA file says so."""
    target, wants_tls = dial_target(address)
    ca = ca_file()
    if not (wants_tls or (wants_tls is None and ca is not None)):
        return create_channel(target)
    try:
        roots = ca.read_bytes() if ca is not None else None
    except OSError as error:
        raise ChannelError(f"cannot read the CA file {ca} ({CA_FILE_VARIABLE}): {error.strerror}") from None
    return create_channel(target, tls=grpc.ssl_channel_credentials(root_certificates=roots))
