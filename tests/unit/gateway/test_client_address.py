"""The client address failed API keys are counted against: the peer, or — from a trusted proxy
only — the nearest untrusted hop of X-Forwarded-For."""

from __future__ import annotations

import pytest

from agentmesh.gateway.client_address import ClientAddresses, parse_networks


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        ("ipv4:10.0.0.5:4000", "203.0.113.9", "203.0.113.9"),  # a trusted proxy names the client
        ("ipv4:198.51.100.1:4000", "203.0.113.9", "198.51.100.1"),  # anyone else's header is ignored
        ("10.0.0.5", "1.1.1.1, 203.0.113.9, 10.0.0.7", "203.0.113.9"),  # trusted hops are walked
        ("10.0.0.5", "10.0.0.7, 10.0.0.8", "10.0.0.7"),  # only proxies: the farthest one
        ("10.0.0.5", "", "10.0.0.5"),
        ("ipv6:[fd00::1]:4000", "2001:db8::9", "2001:db8::9"),
        ("10.0.0.5", "not-an-address", "not-an-address"),
    ],
)
def test_the_client_is_the_nearest_hop_no_trusted_proxy_vouches_past(
    peer: str, forwarded_for: str, client: str
) -> None:
    addresses = ClientAddresses(["10.0.0.0/8", "fd00::/8"])
    assert addresses.of(peer, forwarded_for) == client


def test_without_trusted_proxies_the_header_is_never_read() -> None:
    assert ClientAddresses().of("ipv4:127.0.0.1:1", "203.0.113.9") == "127.0.0.1"


def test_a_bad_cidr_is_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.0/33'"):
        parse_networks(["10.0.0.0/33"])
