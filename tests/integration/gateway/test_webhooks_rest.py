"""A project's webhooks over REST (`/api/v1/projects/{id}/webhooks`): created with the secret
shown once, read and listed without it, changed, tested (the test event reaches a loopback
receiver, which the mesh's egress allow-list permits, signed), its deliveries listed, deleted;
and only by the project's owner. What they deliver is tested against the registry
(tests/integration/registry/test_webhooks.py): here, on SQLite only."""

from __future__ import annotations

import httpx

from tests.integration.gateway.support import Api
from tests.polling import eventually
from tests.webhook_receiver import webhook_receiver


async def test_webhooks_are_managed_and_tested_over_rest(
    http: httpx.AsyncClient, api: Api, once: None
) -> None:
    owner, stranger = await api.user(), await api.user()
    project = await api.project(owner)
    base = f"/api/v1/projects/{project['id']}/webhooks"
    async with webhook_receiver() as receiver:
        made = await http.post(
            base, json={"url": receiver.url, "events": ["run.completed"]}, headers=owner.headers
        )
        assert made.status_code == 201, made.text
        webhook = made.json()
        one = f"{base}/{webhook['id']}"
        assert webhook["secret"].startswith("whsec_")

        got = (await http.get(one, headers=owner.headers)).json()
        assert "secret" not in got and got["events"] == ["run.completed"]
        listed = (await http.get(base, headers=owner.headers)).json()
        assert [w["id"] for w in listed["data"]] == [webhook["id"]] and "secret" not in listed["data"][0]
        patched = await http.patch(one, json={"events": ["run.started", "run.failed"]}, headers=owner.headers)
        assert patched.status_code == 200 and patched.json()["events"] == ["run.started", "run.failed"]
        assert (await http.get(one, headers=stranger.headers)).status_code == 404

        sent = await http.post(f"{one}/test", headers=owner.headers)
        assert sent.status_code == 202, sent.text

        async def delivered() -> bool:
            found = (await http.get(f"{one}/deliveries", headers=owner.headers)).json()["data"]
            return [d["state"] for d in found] == ["delivered"]

        await eventually(delivered, what="the test event delivered")
        received = receiver.delivered()[0]  # at least once: maybe more
        assert received.headers["webhook-id"] == sent.json()["delivery_id"]
        assert received.verified(webhook["secret"])["type"] == "webhook.test"

    refused = await http.post(
        base, json={"url": "http://example.com/", "events": ["run.failed"]}, headers=owner.headers
    )
    assert refused.status_code == 422, refused.text
    assert (await http.delete(one, headers=owner.headers)).status_code == 200
    assert (await http.get(one, headers=owner.headers)).status_code == 404
