"""The address a request really comes from, which failed API keys are throttled by.

Behind a reverse proxy or load balancer every request reaches the gateway from the proxy's
address, so throttling by the connection's peer would throttle all clients as one (and a guesser
among them would lock everyone out). The proxy names the client in `X-Forwarded-For` — but any
client can send that header too, so it is read only from peers in
`AGENTMESH_GATEWAY_TRUSTED_PROXIES`, and only as far as the chain of trusted proxies goes: walking
it from the right (the hop the nearest proxy appended), the first address that is not a trusted
proxy is the client. Entries to its left are the client's own claims and are ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from agentmesh.runtime.client_address import MAX_ADDRESS_CHARS, peer_host

__all__ = ["FORWARDED_FOR", "ClientAddresses", "parse_networks", "peer_host"]

FORWARDED_FOR = "x-forwarded-for"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(cidrs: Sequence[str]) -> list[Network]:
    """CIDRs (or single addresses) as networks; ValueError naming the one that is not."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as error:
            raise ValueError(f"not an IP network (CIDR) or address: {cidr!r}") from error
    return networks


class ClientAddresses:
    """Finds a request's client address given the proxies trusted to name it."""

    def __init__(self, trusted_proxies: Sequence[str] = ()) -> None:
        self._trusted = parse_networks(trusted_proxies)

    def of(self, peer: str, forwarded_for: str | None = None) -> str:
        """The client's address: the peer's host, or — when the peer is a trusted proxy — the
        nearest address in `forwarded_for` that is not one."""
        client = peer_host(peer)
        if not forwarded_for or not self._is_trusted(client):
            return client
        for hop in reversed([hop.strip() for hop in forwarded_for.split(",")]):
            if not hop:
                continue
            client = hop[:MAX_ADDRESS_CHARS]
            if not self._is_trusted(client):
                break
        return client

    def _is_trusted(self, host: str) -> bool:
        if not self._trusted:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._trusted)
