"""Re-creating a terminated agent under its name over REST (`replace_terminated` on
`POST /api/v1/projects/{pid}/agents`, as gRPC's `CreateAgentRequest.replace_terminated`): without it
the terminated agent's name stays taken (409); with it the new agent takes the name and the old one
is renamed; a live agent's name stays taken either way; a value that is not a boolean is refused
naming the field, and nothing is created. The registry's side is tested on both databases
(tests/integration/registry/test_agent_lifecycle.py); this is the route's."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.gateway.support import Api


async def test_a_terminated_agents_name_is_taken_over_only_when_asked(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    old = await api.agent(name="Invoice Bot")
    headers = old.owner.headers
    agents = f"/api/v1/projects/{old.project_id}/agents"
    type_id = (await http.get(old.path, headers=headers)).json()["agent_type_id"]

    def spawn(**fields: Any) -> dict[str, Any]:
        return {"agent_type_id": type_id, "name": "Invoice Bot", **fields}

    # A live agent's name stays taken, asked or not.
    live = await http.post(agents, json=spawn(replace_terminated=True), headers=headers)
    assert live.status_code == 409, live.text

    assert (await http.delete(old.path, headers=headers)).status_code == 200
    for refused in (spawn(), spawn(replace_terminated=False)):
        taken = await http.post(agents, json=refused, headers=headers)
        assert taken.status_code == 409, taken.text

    # Not a boolean (not even one a lax parser would read as one): refused naming the field.
    for value in ("true", 1, None, "yes"):
        bad = await http.post(agents, json=spawn(replace_terminated=value), headers=headers)
        assert bad.status_code == 422, bad.text
        [violation] = bad.json()["field_violations"]
        assert violation["field"] == "replace_terminated"
    listed = (await http.get(agents, headers=headers)).json()["data"]
    assert [agent["id"] for agent in listed] == [old.id]

    created = await http.post(agents, json=spawn(replace_terminated=True), headers=headers)
    assert created.status_code == 201, created.text
    new = created.json()
    assert (new["name"], new["slug"], new["status"]) == ("Invoice Bot", "invoice-bot", "idle")
    assert new["id"] != old.id
    renamed = (await http.get(old.path, headers=headers)).json()
    assert renamed["status"] == "terminated"
    assert renamed["name"].startswith("Invoice Bot (terminated ")
    # The name now leads to the new agent.
    by_name = (await http.get(f"{agents}/invoice-bot", headers=headers)).json()
    assert by_name["id"] == new["id"]


async def test_the_schema_documents_replace_terminated(http: httpx.AsyncClient, once: None) -> None:
    schema = (await http.get("/openapi.json")).json()
    field = schema["components"]["schemas"]["AgentCreate"]["properties"]["replace_terminated"]
    assert (field["type"], field["default"]) == ("boolean", False)
    assert "terminated" in field["description"]
