"""Tool permissions over REST: written lower-case on agent types (superusers), agents' configs and
projects (their owner), read back the same, and every bad rule a 422 naming its field and key."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import Api, suffix


def _violations(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    return [(v["field"], v["description"]) for v in response.json()["field_violations"]]


async def test_an_agent_type_takes_permissions_and_an_expiry(http: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    rules = {"get_current_time": "allow", "mcp:files:write_*": "ask", "delegate:*": "deny"}
    created = await api.agent_type(tool_permissions=rules, input_expiry_seconds=600)
    assert created["tool_permissions"] == rules and created["input_expiry_seconds"] == 600
    path = f"/api/v1/agent-types/{created['id']}"
    assert (await http.get(path, headers=admin.headers)).json()["tool_permissions"] == rules

    patched = await http.patch(path, json={"tool_permissions": {"mcp:*": "deny"}}, headers=admin.headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["tool_permissions"] == {"mcp:*": "deny"}
    assert patched.json()["input_expiry_seconds"] == 600

    user = await api.user()
    refused = await http.patch(path, json={"tool_permissions": {}}, headers=user.headers)
    assert refused.status_code == 403

    bad_value = await http.patch(path, json={"tool_permissions": {"x": "maybe"}}, headers=admin.headers)
    assert any(field.endswith("tool_permissions.x") for field, _ in _violations(bad_value))
    bad_key = await http.patch(path, json={"tool_permissions": {"two words": "deny"}}, headers=admin.headers)
    assert _violations(bad_key) == [
        (
            "agent_type.tool_permissions",
            "key 'two words': a tool's name or pattern must not contain whitespace or control characters",
        )
    ]
    bad_expiry = await http.patch(path, json={"input_expiry_seconds": 2_592_001}, headers=admin.headers)
    assert [field for field, _ in _violations(bad_expiry)] == ["input_expiry_seconds"]
    unknown = await http.patch(path, json={"tool_permission": {"x": "deny"}}, headers=admin.headers)
    assert unknown.status_code == 422
    kept = (await http.get(path, headers=admin.headers)).json()
    assert kept["tool_permissions"] == {"mcp:*": "deny"} and kept["input_expiry_seconds"] == 600


async def test_a_projects_owner_sets_its_permissions(http: httpx.AsyncClient, api: Api) -> None:
    owner, stranger = await api.user(), await api.user()
    created = await http.post(
        "/api/v1/projects",
        json={
            "name": "Guarded",
            "slug": f"guarded-{suffix()}",
            "tool_permissions": {"mcp:*": "ask"},
        },
        headers=owner.headers,
    )
    assert created.status_code == 201, created.text
    project = created.json()
    assert project["tool_permissions"] == {"mcp:*": "ask"}
    path = f"/api/v1/projects/{project['id']}"

    patched = await http.patch(path, json={"tool_permissions": {"delegate:*": "deny"}}, headers=owner.headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["tool_permissions"] == {"delegate:*": "deny"}
    assert patched.json()["name"] == "Guarded"
    hidden = await http.patch(path, json={"tool_permissions": {}}, headers=stranger.headers)
    assert hidden.status_code == 404
    bad = await http.patch(path, json={"tool_permissions": {"": "deny"}}, headers=owner.headers)
    assert [field for field, _ in _violations(bad)] == ["project.tool_permissions"]
    unknown = await http.patch(path, json={"permissions": {}}, headers=owner.headers)
    assert unknown.status_code == 422
    assert (await http.get(path, headers=owner.headers)).json()["tool_permissions"] == {"delegate:*": "deny"}


async def test_an_agents_config_takes_permissions_and_null_drops_them(
    http: httpx.AsyncClient, api: Api
) -> None:
    agent = await api.agent(mock_responses=["hi"], tool_permissions={"get_current_time": "deny"})
    headers = agent.owner.headers
    got = (await http.get(agent.path, headers=headers)).json()
    assert got["config"]["tool_permissions"] == {"get_current_time": "deny"}

    bad = await http.patch(
        agent.path, json={"config": {"tool_permissions": {"a\tb": "ask"}}}, headers=headers
    )
    assert [field for field, _ in _violations(bad)] == ["agent.config.tool_permissions"]
    patched = await http.patch(
        agent.path, json={"config": {"tool_permissions": {"mcp:*": "ask"}}}, headers=headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["config"]["tool_permissions"] == {"mcp:*": "ask"}
    assert patched.json()["config"]["mock_responses"] == ["hi"]  # not named: unchanged
    dropped = await http.patch(agent.path, json={"config": {"tool_permissions": None}}, headers=headers)
    assert dropped.json()["config"]["tool_permissions"] is None
