"""An agent type's delegation bounds over REST: written by superusers, read back the same, kept
by a PATCH that does not name them, and a value out of range a 422 naming its field."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import Api


async def test_an_agent_type_takes_delegation_limits(http: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    limits = {"max_per_step": 2, "max_per_chat": 20, "allow_reentry": True}
    created = await api.agent_type(delegation_limits=limits)
    assert created["delegation_limits"] == limits
    path = f"/api/v1/agent-types/{created['id']}"

    renamed = await http.patch(path, json={"description": "renamed"}, headers=admin.headers)
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["delegation_limits"] == limits

    patched = await http.patch(path, json={"delegation_limits": {"max_per_chat": 5}}, headers=admin.headers)
    assert patched.status_code == 200, patched.text
    # The bounds are one value: what a PATCH leaves out of them goes back to the defaults.
    assert patched.json()["delegation_limits"] == {
        "max_per_step": 0,
        "max_per_chat": 5,
        "allow_reentry": False,
    }

    too_many = await http.patch(
        path, json={"delegation_limits": {"max_per_chat": 10_001}}, headers=admin.headers
    )
    assert too_many.status_code == 422, too_many.text
    assert "max_per_chat" in too_many.text
    default = await api.agent_type()
    assert default["delegation_limits"] == {"max_per_step": 0, "max_per_chat": 0, "allow_reentry": False}
