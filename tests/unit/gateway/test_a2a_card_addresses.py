"""The gRPC interface on an agent card is an address a client can dial: a port bound on every
interface is named by the host the client reached the HTTP face at."""

from __future__ import annotations

import pytest

from agentmesh.gateway.a2a.card import reachable_grpc_address


@pytest.mark.parametrize(
    ("bound", "base_url", "expected"),
    [
        ("mesh.example.com:443", "https://other.example.com", "mesh.example.com:443"),
        ("127.0.0.1:50050", "http://localhost:8080", "127.0.0.1:50050"),
        ("0.0.0.0:50050", "https://mesh.example.com", "mesh.example.com:50050"),
        ("[::]:50050", "http://[2001:db8::1]:8080", "[2001:db8::1]:50050"),
        ("0.0.0.0:50050", "", "0.0.0.0:50050"),  # nothing better known
    ],
)
def test_a_wildcard_host_becomes_the_reached_host(bound: str, base_url: str, expected: str) -> None:
    assert reachable_grpc_address(bound, base_url) == expected
