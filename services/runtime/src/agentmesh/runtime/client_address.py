"""The address a call's end client connects from, as far as a service can trust it.

A service behind the gateway sees the gateway's address, not the client's: the gateway names the
client it saw in `x-agentmesh-client-address` metadata. Anyone who reaches a service's port could
send that header too, so it counts only on a call that also carries a valid service credential (a
mesh service vouches for it); otherwise the connection's own peer is the client. Sign-in
throttling in the registry is keyed by it (registry/identity/sign_in_throttle.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import grpc

from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import Admit, PolicyInterceptor
from agentmesh.runtime.service_identity import ServiceCredentials, service_credential

CLIENT_ADDRESS = "x-agentmesh-client-address"
# An address longer than this is no address: kept as a bounded key, never parsed further.
MAX_ADDRESS_CHARS = 64

# The current call's client address ("" outside a call the interceptor admitted).
current_client_address: ContextVar[str] = ContextVar("agentmesh_client_address", default="")


def peer_host(peer: str) -> str:
    """The host of a peer as gRPC (`ipv4:1.2.3.4:5678`, `ipv6:[::1]:5678`) or an HTTP server
    (`1.2.3.4`) names it: every connection of one client gives the same host."""
    for scheme in ("ipv4:", "ipv6:"):
        if peer.startswith(scheme):
            address, _, port = peer.removeprefix(scheme).rpartition(":")
            return address.strip("[]") if port.isdigit() else peer.removeprefix(scheme)
    return peer


class ClientAddressInterceptor(PolicyInterceptor):
    """Sets `current_client_address` for every call of the named services: the address a mesh
    service vouched for (its credential verified), else the connection's peer host."""

    def __init__(self, credentials: ServiceCredentials, services: Iterable[str]) -> None:
        super().__init__()
        self._credentials = credentials
        self._prefixes = tuple(f"/{name}/" for name in services)

    def admission(self, method: str, handler: grpc.RpcMethodHandler) -> Admit | None:
        if not method.startswith(self._prefixes):
            return None

        def admit(request: Any, context: grpc.aio.ServicerContext) -> None:
            current_client_address.set(self.client_address(context))

        return admit

    def client_address(self, context: grpc.aio.ServicerContext) -> str:
        metadata = context.invocation_metadata()
        vouched = next((str(value) for key, value in metadata or () if key == CLIENT_ADDRESS), "")
        if vouched:
            try:
                self._credentials.verify(service_credential(metadata))
                return vouched[:MAX_ADDRESS_CHARS]
            except DomainError:
                pass  # a claim nobody vouched for: the peer is all there is to go by
        return peer_host(context.peer() or "")[:MAX_ADDRESS_CHARS]
