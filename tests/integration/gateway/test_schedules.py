"""Schedules through the mesh: two gateways' firers race on a clock the test sets (no waiting for a
real minute) with two executors behind them, each due time fires once, its run goes through the
normal chat path with the scripted `mock` model, and the overlap policies decide the next due
time's firing while the previous run is still going. The REST face refuses a bad field naming it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import httpx

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.schedules import utc_now
from tests.integration.gateway.conftest import start_executor, start_gateway
from tests.integration.gateway.support import Agent, Api
from tests.polling import eventually

# About a second and a half per run (11 chunks, 0.15 s apart): the next due time is claimed
# within milliseconds of the first, while every first run is still going.
SLOW = {"content": "word " * 130, "delay_seconds": 0.15}
EVERY_MINUTE = "* * * * *"  # the mesh's gateways fire nothing on their own (conftest)
FINAL = {"completed", "failed", "cancelled", "skipped_overlap", "skipped_missed"}


async def _schedule(http: httpx.AsyncClient, agent: Agent, name: str, **fields: Any) -> dict[str, Any]:
    message = "report for {{scheduled_for}}"
    body = {"name": name, "agent": agent.name, "message": message, "cron": EVERY_MINUTE}
    response = await http.post(
        f"/api/v1/projects/{agent.project_id}/schedules", json={**body, **fields}, headers=agent.owner.headers
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def _firings(http: httpx.AsyncClient, agent: Agent, schedule: dict[str, Any]) -> list[dict[str, Any]]:
    response = await http.get(
        f"/api/v1/projects/{agent.project_id}/schedules/{schedule['id']}/firings", headers=agent.owner.headers
    )
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


async def test_each_due_time_fires_once_under_each_overlap_policy(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    schedules = {
        "skip": await _schedule(http, agent, "skip", overlap_policy="skip"),
        "queue": await _schedule(http, agent, "queue", overlap_policy="queue", session_policy="continue"),
        "cancel_previous": await _schedule(http, agent, "cancel", overlap_policy="cancel_previous"),
    }
    first_due = datetime.fromisoformat(schedules["skip"]["next_fire_at"])
    # The mesh's gateway and another one, neither polling on its own (conftest): the test ticks them.
    # ... and the other one sends its runs to a second executor as well.
    executor = await start_executor(mesh)
    extra = await start_gateway(
        mesh, executor_addresses=[mesh.services["executor"].address, executor.address]
    )
    gateways = [mesh.gateway, extra]
    try:

        async def fire_at(now: datetime) -> list[str]:
            for gateway in gateways:
                gateway.schedules.clock = lambda: now
            started = await asyncio.gather(*(g.schedules.tick() for g in gateways for _ in range(2)))
            return [firing for ids in started for firing in ids]

        async def outcomes(policy: str) -> list[str]:
            return [f["outcome"] for f in await _firings(http, agent, schedules[policy])]

        # One firing per schedule, however many firers race for the due time.
        assert len(await fire_at(first_due)) == 3
        # The next due time comes while those are still starting or running.
        second_due = first_due + timedelta(minutes=1)
        assert len(await fire_at(second_due)) == 1  # cancel_previous's; the others skip or wait
        path = f"/api/v1/projects/{agent.project_id}/schedules/{schedules['skip']['id']}"
        read = await http.get(path, headers=agent.owner.headers)
        assert datetime.fromisoformat(read.json()["next_fire_at"]) == second_due + timedelta(minutes=1)
        assert (await outcomes("skip"))[0] == "skipped_overlap"
        assert (await outcomes("queue"))[0] == "queued"
        assert (await outcomes("cancel_previous"))[1] == "cancelled"

        async def settled() -> bool:
            await fire_at(second_due)  # hands out the queued firing once the run before it ended
            return all([set(await outcomes(p)) <= FINAL for p in schedules])

        await eventually(settled, timeout=30, what="every firing ended")
        assert await outcomes("skip") == ["skipped_overlap", "completed"]
        assert await outcomes("queue") == ["completed", "completed"]
        assert await outcomes("cancel_previous") == ["completed", "cancelled"]
        queue = await _firings(http, agent, schedules["queue"])
        # `continue`: one session, the schedule's; the queued run started after the first ended.
        assert {f["session_id"] for f in queue} == {schedules["queue"]["session_id"]}
        assert queue[0]["fired_at"] >= queue[1]["ended_at"]
        events = await api.session_events(agent, schedules["queue"]["session_id"])
        inputs = [e["content"] for e in events if e["event_type"] == "user_message"]
        assert inputs == [f"report for {first_due.isoformat()}", f"report for {second_due.isoformat()}"]
    finally:
        mesh.gateway.schedules.clock = utc_now
        await extra.stop(1)
        await executor.stop(1)


async def test_bad_fields_are_refused_naming_the_field(api: Api, http: httpx.AsyncClient, once: None) -> None:
    agent = await api.agent()
    base = f"/api/v1/projects/{agent.project_id}/schedules"
    for field, value in (("cron", "* * *"), ("time_zone", "Nowhere/City"), ("overlap_policy", "later")):
        body = {"name": "nightly", "agent": agent.name, "message": "go", "cron": "0 3 * * *", field: value}
        response = await http.post(base, json=body, headers=agent.owner.headers)
        assert response.status_code == 422, response.text  # INVALID_ARGUMENT, as on every REST path
        assert f"schedule.{field}" in response.text
    listed = await http.get(base, headers=agent.owner.headers)
    assert listed.json()["data"] == []
