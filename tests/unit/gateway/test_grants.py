"""The gateway remembers passed project checks briefly, per token, and never refusals."""

from __future__ import annotations

import time

from agentmesh.gateway.access import GrantCache


def test_a_grant_holds_until_its_ttl_runs_out(monkeypatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    grants = GrantCache(ttl_seconds=5.0)
    grant = ("token-a", "", "project-slug")
    assert not grants.holds(grant)
    grants.add(grant)
    assert grants.holds(grant)
    assert not grants.holds(("token-b", "", "project-slug")), "grants are per token"
    now[0] += 4.9
    assert grants.holds(grant)
    now[0] += 0.2
    assert not grants.holds(grant)


def test_no_ttl_remembers_nothing() -> None:
    grants = GrantCache(ttl_seconds=0)
    grants.add(("token", "p", ""))
    assert not grants.holds(("token", "p", ""))


def test_the_oldest_grants_make_room() -> None:
    grants = GrantCache(ttl_seconds=60, capacity=2)
    for name in ("a", "b", "c"):
        grants.add((name, "", ""))
    assert [grants.holds((name, "", "")) for name in ("a", "b", "c")] == [False, True, True]
