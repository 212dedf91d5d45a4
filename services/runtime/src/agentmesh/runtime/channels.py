"""Channels to peer services: created once per peer by a composition root, with the shared client
interceptor and a retry policy for UNAVAILABLE only (a stream cannot be retried once headers
arrived; readers resume by `seq` instead), and a reconnect backoff capped at about a second.
`PeerSecurity` adds what a call between services carries: this service's credential on every call
(`service_identity`) and TLS when configured (`tls`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import grpc

from agentmesh.runtime.interceptors import client_interceptors
from agentmesh.runtime.service_identity import ServiceCredentials, credential_interceptors
from agentmesh.runtime.tls import PLAINTEXT, TlsFiles

_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [{}],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "1s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ]
    }
)

# gRPC's own reconnect backoff grows to 120 s by default: a peer back from a long outage would sit
# unreached until the channel's next attempt (a 45 s executor outage cost another 30 s of failed
# chats). Capped at 1 s (plus gRPC's 20 % jitter), a returning peer is reached within about a
# second of serving; the price is one connection attempt per second to a peer that stays down.
RECONNECT_BACKOFF_MS = 1_000


@dataclass(frozen=True)
class PeerSecurity:
    """How this service's calls to its peers are secured: the service credential it sends (None:
    none, as for a client outside the mesh) and the TLS it dials with."""

    credentials: ServiceCredentials | None = None
    tls: TlsFiles = PLAINTEXT


NO_PEER_SECURITY = PeerSecurity()


def create_channel(
    address: str,
    *,
    max_message_bytes: int = 4 * 1024 * 1024,
    security: PeerSecurity = NO_PEER_SECURITY,
    tls: grpc.ChannelCredentials | None = None,
) -> grpc.aio.Channel:
    """A channel to `address`: over TLS per `security.tls`, or per `tls` — credentials a client
    outside the mesh (the CLI) builds itself, e.g. trusting the system's CAs."""
    interceptors = [
        *(credential_interceptors(security.credentials) if security.credentials else ()),
        *client_interceptors(),
    ]
    options = [
        ("grpc.service_config", _SERVICE_CONFIG),
        ("grpc.enable_retries", 1),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS // 10),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
    ]
    tls = tls or security.tls.channel_credentials()
    if tls is None:
        return grpc.aio.insecure_channel(address, interceptors=interceptors, options=options)
    return grpc.aio.secure_channel(address, tls, interceptors=interceptors, options=options)
