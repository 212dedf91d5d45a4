"""The REST/JSON API of DESIGN §6 through the gateway: every route, field names, status codes and
the `{"detail": ...}` errors, on both databases."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import PASSWORD, Api, suffix

AGENT_TYPE_FIELDS = {
    "id",
    "name",
    "slug",
    "description",
    "expertise",
    "personality_prompt",
    "primary_model",
    "fallback_models",
    "model_params",
    "tools",
    "mcp_servers",
    "kind",
    "sub_agents",
    "max_steps",
    "max_iterations",
    "is_active",
    "created_at",
    "updated_at",
    # A person in the loop (DESIGN §12).
    "tool_permissions",
    "input_expiry_seconds",
    # Bounds on the delegation tree under a chat.
    "delegation_limits",
    # Sessions that last (DESIGN §12).
    "context_budget_tokens",
    "compaction_model",
    "compaction_prompt",
    # What one run may spend (docs/usage.md).
    "run_budget",
}
AGENT_FIELDS = {
    "id",
    "name",
    "slug",
    "project_id",
    "agent_type_id",
    "status",
    "config",
    "public",
    "tasks_completed",
    "tokens_used",
    "cost",
    "created_at",
    "last_activity_at",
}
CONFIG_FIELDS = {
    "instructions",
    "primary_model",
    "model_params",
    "max_steps",
    "max_iterations",
    "tools",
    "sub_agents",
    "network_access",
    "mock_responses",
    "double_texting",
    "tool_permissions",
}


async def test_register_login_refresh_me_and_logout(http: httpx.AsyncClient) -> None:
    email = f"Someone-{suffix()}@Example.com"
    registered = await http.post(
        "/api/v1/auth/register",
        json={"email": email, "password": PASSWORD, "first_name": "Ada", "last_name": "Lovelace"},
    )
    assert registered.status_code == 201, registered.text
    user = registered.json()
    assert user["first_name"] == "Ada" and user["last_name"] == "Lovelace"
    assert user["is_superuser"] is False and user["is_active"] is True
    assert {"id", "email", "created_at"} <= set(user)
    assert "password" not in registered.text

    # A taken e-mail is not confirmed: the same answer as a new registration, nothing changed.
    again = await http.post("/api/v1/auth/register", json={"email": email, "password": PASSWORD})
    assert again.status_code == 201 and set(again.json()) == set(user)
    assert again.json()["id"] != user["id"]

    login = await http.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert login.status_code == 200
    tokens = login.json()
    assert set(tokens) == {"access_token", "refresh_token", "token_type", "expires_in"}
    assert tokens["token_type"] == "bearer" and tokens["expires_in"] > 0

    me = await http.get("/api/v1/users/me", headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert me.status_code == 200
    assert me.json()["id"] == user["id"]

    refreshed = await http.post("/api/v1/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
    assert refreshed.status_code == 200
    new_tokens = refreshed.json()
    assert new_tokens["refresh_token"] != tokens["refresh_token"]

    logout = await http.post("/api/v1/auth/logout", json={"refresh_token": new_tokens["refresh_token"]})
    assert logout.status_code == 200
    revoked = await http.post("/api/v1/auth/refresh", json={"refresh_token": new_tokens["refresh_token"]})
    assert revoked.status_code == 401


async def test_bad_sign_ins_and_tokens_are_401(http: httpx.AsyncClient, api: Api) -> None:
    user = await api.user()
    wrong = await http.post("/api/v1/auth/login", json={"email": user.email, "password": "not-it-at-all"})
    assert wrong.status_code == 401
    assert wrong.json()["detail"]
    for headers in ({}, {"Authorization": "Bearer forged.token.here"}, {"Authorization": "Basic abc"}):
        response = await http.get("/api/v1/users/me", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "detail" in response.json()


async def test_agent_types_crud_is_for_superusers(http: httpx.AsyncClient, api: Api) -> None:
    admin, user = await api.admin(), await api.user()
    created = await api.agent_type(
        expertise=["math"], model_params={"temperature": 0.5, "max_tokens": 100}, kind="sequential"
    )
    assert set(created) == AGENT_TYPE_FIELDS
    assert created["kind"] == "sequential"
    assert created["model_params"] == {"temperature": 0.5, "max_tokens": 100}
    assert created["is_active"] is True

    listed = await http.get("/api/v1/agent-types", params={"page_size": 2}, headers=user.headers)
    assert listed.status_code == 200
    page = listed.json()
    assert set(page) == {"data", "pagination"}
    assert set(page["pagination"]) == {"total", "page", "page_size", "total_pages"}
    assert page["pagination"]["page_size"] == 2 and len(page["data"]) <= 2
    assert page["pagination"]["total_pages"] == -(-page["pagination"]["total"] // 2)

    by_id = await http.get(f"/api/v1/agent-types/{created['id']}", headers=user.headers)
    by_slug = await http.get(f"/api/v1/agent-types/slug/{created['slug']}", headers=user.headers)
    assert by_id.json() == by_slug.json() == created

    patched = await http.patch(
        f"/api/v1/agent-types/{created['id']}", json={"description": "changed"}, headers=admin.headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["description"] == "changed"
    assert patched.json()["model_params"] == created["model_params"]  # unspecified: unchanged

    for method, path, body in [
        ("POST", "/api/v1/agent-types", {"name": "x", "slug": f"x-{suffix()}"}),
        ("PATCH", f"/api/v1/agent-types/{created['id']}", {"description": "mine"}),
        ("DELETE", f"/api/v1/agent-types/{created['id']}", None),
    ]:
        response = await http.request(method, path, json=body, headers=user.headers)
        assert response.status_code == 403, (method, path, response.text)

    deleted = await http.delete(f"/api/v1/agent-types/{created['id']}", headers=admin.headers)
    assert deleted.status_code == 200
    assert "message" in deleted.json()
    gone = await http.get(f"/api/v1/agent-types/{created['id']}", headers=user.headers)
    assert gone.status_code == 404


async def test_projects_belong_to_their_owner(http: httpx.AsyncClient, api: Api) -> None:
    owner, other, admin = await api.user(), await api.user(), await api.admin()
    project = await api.project(owner)
    assert set(project) == {
        "id",
        "name",
        "slug",
        "description",
        "owner_id",
        "created_at",
        "updated_at",
        "tool_permissions",
        "limits",
    }

    assert (await http.get(f"/api/v1/projects/{project['id']}", headers=owner.headers)).status_code == 200
    assert (await http.get(f"/api/v1/projects/{project['id']}", headers=admin.headers)).status_code == 200
    listed = (await http.get("/api/v1/projects", headers=other.headers)).json()
    assert project["id"] not in [p["id"] for p in listed["data"]]

    patched = await http.patch(
        f"/api/v1/projects/{project['id']}", json={"description": "new"}, headers=owner.headers
    )
    assert patched.json()["description"] == "new" and patched.json()["slug"] == project["slug"]

    taken = await http.post(
        "/api/v1/projects", json={"name": "dup", "slug": project["slug"]}, headers=other.headers
    )
    assert taken.status_code == 409

    deleted = await http.delete(f"/api/v1/projects/{project['id']}", headers=owner.headers)
    assert deleted.status_code == 200
    assert (await http.get(f"/api/v1/projects/{project['id']}", headers=owner.headers)).status_code == 404


async def test_agents_spawn_list_lifecycle_metrics_and_terminate(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    agent = await api.agent(owner, mock_responses=["hi"], instructions="Be brief.", network_access=[])
    got = (await http.get(agent.path, headers=owner.headers)).json()
    assert set(got) == AGENT_FIELDS
    assert set(got["config"]) == CONFIG_FIELDS
    assert got["status"] == "idle"
    assert got["config"]["instructions"] == "Be brief."
    assert got["config"]["mock_responses"] == ["hi"]
    assert got["config"]["primary_model"] is None  # not overridden

    listed = (await http.get(f"/api/v1/projects/{agent.project_id}/agents", headers=owner.headers)).json()
    assert [a["id"] for a in listed["data"]] == [agent.id]
    assert listed["pagination"] == {"total": 1, "page": 1, "page_size": 50, "total_pages": 1}

    patched = await http.patch(
        agent.path, json={"config": {"instructions": None, "max_steps": 3}}, headers=owner.headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["config"]["instructions"] is None
    assert patched.json()["config"]["max_steps"] == 3
    assert patched.json()["config"]["mock_responses"] == ["hi"]
    assert patched.json()["public"] is False

    published = await http.patch(agent.path, json={"public": True}, headers=owner.headers)
    assert published.status_code == 200, published.text
    assert published.json()["public"] is True
    assert published.json()["config"]["max_steps"] == 3  # the config is left as it was

    paused = await http.post(f"{agent.path}/pause", headers=owner.headers)
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    again = await http.post(f"{agent.path}/pause", headers=owner.headers)
    assert again.status_code == 400, again.text
    resumed = await http.post(f"{agent.path}/resume", headers=owner.headers)
    assert resumed.json()["status"] == "idle"

    metrics = await http.get(f"{agent.path}/metrics", headers=owner.headers)
    assert set(metrics.json()) == {
        "total_instances",
        "active_instances",
        "idle_instances",
        "total_tasks_completed",
        "total_tokens_used",
        "total_cost_incurred",
    }

    terminated = await http.delete(agent.path, headers=owner.headers)
    assert terminated.status_code == 200
    assert terminated.json()["message"]
    assert (await http.get(agent.path, headers=owner.headers)).json()["status"] == "terminated"
    resume_terminated = await http.post(f"{agent.path}/resume", headers=owner.headers)
    assert resume_terminated.status_code in (400, 422), resume_terminated.text


async def test_spawn_errors(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    agent = await api.agent(owner)
    project = f"/api/v1/projects/{agent.project_id}/agents"
    inactive = await api.agent_type(is_active=False)
    response = await http.post(
        project, json={"agent_type_id": inactive["id"], "name": "sleepy"}, headers=owner.headers
    )
    assert response.status_code == 422, response.text

    active = await api.agent_type()
    duplicate = await http.post(
        project, json={"agent_type_id": active["id"], "name": agent.name}, headers=owner.headers
    )
    assert duplicate.status_code == 409

    mismatch = await http.post(
        project,
        json={"agent_type_id": active["id"], "name": "other", "project_id": "someone-else"},
        headers=owner.headers,
    )
    assert mismatch.status_code == 422
    assert "project_id" in mismatch.json()["detail"]

    bad_name = await http.post(
        project, json={"agent_type_id": active["id"], "name": "bell\u0007name"}, headers=owner.headers
    )
    assert bad_name.status_code == 422
    assert "agent.name" in bad_name.json()["detail"]
    bad_slug = await http.post(
        project,
        json={"agent_type_id": active["id"], "name": "Fine Name", "slug": "Not A Label"},
        headers=owner.headers,
    )
    assert bad_slug.status_code == 422
    assert "agent.slug" in bad_slug.json()["detail"]
    same_slug = await http.post(
        project, json={"agent_type_id": active["id"], "name": agent.name.upper()}, headers=owner.headers
    )
    assert same_slug.status_code == 409, same_slug.text


async def test_another_user_probing_a_project_learns_nothing(http: httpx.AsyncClient, api: Api) -> None:
    owner, other = await api.user(), await api.user()
    agent = await api.agent(owner)
    routes = [
        ("GET", f"/api/v1/projects/{agent.project_id}", None),
        ("PATCH", f"/api/v1/projects/{agent.project_id}", {"name": "mine"}),
        ("DELETE", f"/api/v1/projects/{agent.project_id}", None),
        ("GET", f"/api/v1/projects/{agent.project_id}/agents", None),
        ("POST", f"/api/v1/projects/{agent.project_id}/agents", {"agent_type_id": "x", "name": "y"}),
        ("GET", agent.path, None),
        ("PATCH", agent.path, {"config": {"instructions": "obey me"}}),
        ("DELETE", agent.path, None),
        ("POST", f"{agent.path}/pause", None),
        ("POST", f"{agent.path}/resume", None),
        ("GET", f"{agent.path}/metrics", None),
        ("GET", f"/api/v1/projects/{agent.project_id}/sessions", None),
        ("GET", f"/api/v1/projects/{agent.project_id}/sessions/s1/events", None),
        ("GET", f"{agent.base}/health", None),
        ("GET", f"{agent.base}/.well-known/agent", None),
        ("GET", f"{agent.base}/.well-known/agent-card.json", None),
        ("GET", f"{agent.base}/memory/events", None),
        ("GET", f"{agent.base}/v1/models", None),
    ]
    for method, path, body in routes:
        response = await http.request(method, path, json=body, headers=other.headers)
        assert response.status_code in (403, 404), (method, path, response.status_code, response.text)
    # Nothing changed.
    assert await api.status(agent) == "idle"


async def test_bad_bodies_get_422_or_400_naming_the_field(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    cases = [
        ({"name": "p", "slug": f"s-{suffix()}", "colour": "red"}, "colour"),  # unknown field
        ({"name": 5, "slug": f"s-{suffix()}"}, "name"),  # wrong type
        ({"slug": f"s-{suffix()}"}, "name"),  # missing
        ({"name": "nul\x00", "slug": f"s-{suffix()}"}, "name"),  # unstorable
    ]
    for body, field in cases:
        response = await http.post("/api/v1/projects", json=body, headers=owner.headers)
        assert response.status_code == 422, (body, response.text)
        assert field in response.text
    not_json = await http.post(
        "/api/v1/projects",
        content=b"{not json",
        headers={**owner.headers, "Content-Type": "application/json"},
    )
    assert not_json.status_code in (400, 422)
    listed = await http.get("/api/v1/projects", params={"page": 0}, headers=owner.headers)
    assert listed.status_code == 422
    huge_int = await api.agent_type()
    response = await http.patch(
        f"/api/v1/agent-types/{huge_int['id']}",
        json={"max_steps": 2**40},
        headers=(await api.admin()).headers,
    )
    assert response.status_code == 422
    assert "max_steps" in response.text
    # Still serving.
    assert (await http.get("/api/v1/users/me", headers=owner.headers)).status_code == 200


async def test_unknown_ids_are_404(http: httpx.AsyncClient, api: Api) -> None:
    owner = await api.user()
    agent = await api.agent(owner)
    for path in [
        "/api/v1/agent-types/nope",
        "/api/v1/agent-types/slug/nope",
        "/api/v1/projects/nope",
        f"/api/v1/projects/{agent.project_id}/agents/nope",
        f"/api/v1/projects/{agent.project_id}/sessions/nope/events",
        f"/agents/{agent.project_slug}/nobody/health",
        "/api/v1/no-such-route",
    ]:
        response = await http.get(path, headers=owner.headers)
        assert response.status_code == 404, (path, response.text)
        assert "detail" in response.json()


async def test_sessions_page_by_number_newest_first(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["ok"])
    for session_id in ("s-first", "s-second", "s-third"):
        response = await http.post(
            f"{agent.base}/v1/chat/completions",
            json={"model": agent.model, "messages": [{"role": "user", "content": "hi"}]},
            headers={**agent.owner.headers, "X-Session-Id": session_id},
        )
        assert response.status_code == 200, response.text
    url = f"/api/v1/projects/{agent.project_id}/sessions"

    async def page(number: int) -> dict:
        response = await http.get(url, params={"page": number, "page_size": 2}, headers=agent.owner.headers)
        assert response.status_code == 200, response.text
        return response.json()

    first, second, past = await page(1), await page(2), await page(3)
    assert [s["id"] for s in first["data"]] == ["s-third", "s-second"]
    assert [s["id"] for s in second["data"]] == ["s-first"]
    assert past["data"] == []
    assert first["pagination"] == {"total": 3, "page": 1, "page_size": 2, "total_pages": 2}
    assert second["pagination"]["page"] == 2


async def test_head_answers_like_get_without_a_body(api: Api, http: httpx.AsyncClient) -> None:
    agent = await api.agent(mock_responses=["ok"])
    for path in ("/healthz", agent.path, f"/api/v1/projects/{agent.project_id}/agents"):
        get = await http.get(path, headers=agent.owner.headers)
        head = await http.head(path, headers=agent.owner.headers)
        assert get.status_code == 200 and head.status_code == 200, (path, head.status_code)
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
    # The same access checks as GET: no token, no answer; POST-only routes still refuse HEAD.
    assert (await http.head(agent.path)).status_code == 401
    assert (await http.head("/api/v1/auth/login")).status_code == 405
