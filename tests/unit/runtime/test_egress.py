"""The egress policy's decisions: which addresses a tenant's URL may lead to, what the allow-list
permits, and how the setting is read (the HTTP side: tests/integration/executor/test_egress.py)."""

from __future__ import annotations

import pytest

from agentmesh.executor.settings import ExecutorSettings
from agentmesh.runtime.egress import LOOPBACK, EgressPolicy, EgressRefused, allow_entries

REFUSED_BY_DEFAULT = [
    "127.0.0.1",
    "::1",
    "::ffff:127.0.0.1",  # loopback written as IPv6
    "64:ff9b::a9fe:a9fe",  # the metadata service through NAT64
    "169.254.169.254",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "fd00::1",
    "fe80::1",
    "0.0.0.0",
    "224.0.0.1",
]


@pytest.mark.parametrize("host", REFUSED_BY_DEFAULT)
async def test_addresses_off_the_public_internet_are_refused_by_default(host: str) -> None:
    with pytest.raises(EgressRefused, match="is not an address this mesh may reach"):
        await EgressPolicy().address_for(host, 80)


async def test_a_public_address_is_reached_as_it_is() -> None:
    assert await EgressPolicy().address_for("203.0.114.7", 443) == "203.0.114.7"
    assert await EgressPolicy().address_for("[2606:4700::1111]", 443) == "2606:4700::1111"


async def test_the_allow_list_permits_networks_and_names() -> None:
    policy = EgressPolicy(["10.0.0.0/8", "::1", "localhost"])
    assert await policy.address_for("10.9.8.7", 80) == "10.9.8.7"
    assert await policy.address_for("::1", 80) == "::1"
    assert await policy.address_for("localhost", 80) in ("127.0.0.1", "::1")
    with pytest.raises(EgressRefused):
        await policy.address_for("127.0.0.1", 80)  # `localhost` names a host, not its address
    assert await EgressPolicy(LOOPBACK).address_for("localhost", 80) in ("127.0.0.1", "::1")


async def test_a_name_that_does_not_resolve_is_refused_as_one_that_resolves_privately() -> None:
    with pytest.raises(EgressRefused) as refused:
        await EgressPolicy().address_for("nothing-here.invalid", 80)
    assert str(refused.value).startswith("nothing-here.invalid is not an address this mesh may reach")


async def test_the_meshs_own_listening_addresses_are_refused() -> None:
    policy = EgressPolicy(mesh_endpoints=["203.0.114.7:50053"])
    with pytest.raises(EgressRefused):
        await policy.address_for("203.0.114.7", 50053)
    assert await policy.address_for("203.0.114.7", 8443) == "203.0.114.7"


def test_the_setting_is_comma_separated_or_json_and_checked_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTMESH_EGRESS_ALLOW", "10.0.0.0/8, agents.internal ,")
    assert ExecutorSettings().egress_allow == ["10.0.0.0/8", "agents.internal"]
    assert allow_entries('["::1"]') == ["::1"]
    with pytest.raises(ValueError, match="AGENTMESH_EGRESS_ALLOW: not a CIDR, an address or a host name"):
        allow_entries("http://agents.internal/")
