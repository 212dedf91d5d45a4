"""Suspended runs' requests for a person's input through the gateway: listed, read and answered
over REST (`/api/v1/projects/{pid}/input-requests`) and over the public gRPC API, by the
project's owner and API keys scoped to it, and by nobody else. The run is suspended as an executor
suspends one (the registry's internal API, with the mesh's service credential), since the
executor's side is not what is tested here."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import pytest
import pytest_asyncio
from google.protobuf import timestamp_pb2

from agentmesh.cli.mesh import Mesh
from agentmesh.common.v1 import run_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.runtime.identity import TokenCodec
from tests.bearer import service_channel
from tests.integration.gateway.conftest import LOOP
from tests.integration.gateway.support import Agent, Api, asking_agent, asks, sse_blocks
from tests.integration.gateway.test_api_keys import create_key, key_headers
from tests.mesh import JWT_SECRET, bearer
from tests.polling import eventually


@dataclass
class Suspended:
    """An agent whose run waits for an approval and an answer."""

    agent: Agent
    session_id: str
    approval_id: str
    question_id: str

    @property
    def base(self) -> str:
        return f"/api/v1/projects/{self.agent.project_id}/input-requests"


@pytest_asyncio.fixture(loop_scope=LOOP)
async def registry(mesh: Mesh) -> AsyncIterator[RegistryClient]:
    """The registry as executors reach it: its internal service, with the mesh's credential."""
    async with service_channel(mesh.services["registry"].address, JWT_SECRET) as channel:
        yield RegistryClient(channel)


def _moment(at: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(at)
    return stamp


async def suspend(api: Api, registry: RegistryClient, agent: Agent | None = None) -> Suspended:
    agent = agent or await api.agent()
    system = bearer(TokenCodec(JWT_SECRET).system_token())
    run_id, session_id = f"run-{uuid.uuid4().hex[:8]}", f"session-{uuid.uuid4().hex[:8]}"
    await registry.start_agent_run(
        agent.id, run_id, session_id=session_id, executor_id="exec-x", metadata=system
    )
    now = datetime.now(UTC)
    approval = run_pb2.InputRequest(
        id=f"{run_id}-a",
        kind=run_pb2.INPUT_KIND_APPROVAL,
        tool="delete_file",
        question='delete_file({"path": "/tmp/x"})',
        call_id="call-1",
        created_at=_moment(now),
        expires_at=_moment(now + timedelta(hours=1)),
    )
    approval.arguments.update({"path": "/tmp/x"})
    question = run_pb2.InputRequest(
        id=f"{run_id}-q",
        kind=run_pb2.INPUT_KIND_QUESTION,
        question="Which folder?",
        call_id="call-2",
        created_at=_moment(now + timedelta(milliseconds=1)),
        expires_at=_moment(now + timedelta(hours=1)),
    )
    await registry.suspend_run(
        agent.id, run_id, executor_id="exec-x", requests=[approval, question], metadata=system
    )
    return Suspended(agent, session_id, approval.id, question.id)


async def test_requests_are_listed_read_and_answered_once_over_rest(
    http: httpx.AsyncClient, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    owner = waiting.agent.owner.headers
    assert await api.status(waiting.agent) == "waiting"

    listed = await http.get(waiting.base, headers=owner)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [r["id"] for r in body["data"]] == [waiting.approval_id, waiting.question_id]
    assert body["next_page_token"] == ""
    first = body["data"][0]
    assert (first["kind"], first["state"], first["tool"], first["arguments"]) == (
        "approval",
        "pending",
        "delete_file",
        {"path": "/tmp/x"},
    )
    assert (first["session_id"], first["agent"], first["response"]) == (
        waiting.session_id,
        waiting.agent.name,
        None,
    )
    page = (await http.get(waiting.base, params={"page_size": 1}, headers=owner)).json()
    assert [r["id"] for r in page["data"]] == [waiting.approval_id] and page["next_page_token"]
    rest = await http.get(
        waiting.base, params={"page_size": 1, "page_token": page["next_page_token"]}, headers=owner
    )
    assert [r["id"] for r in rest.json()["data"]] == [waiting.question_id]
    elsewhere = await http.get(waiting.base, params={"session_id": "another"}, headers=owner)
    assert elsewhere.json()["data"] == []
    one = await http.get(f"{waiting.base}/{waiting.question_id}", headers=owner)
    assert one.status_code == 200 and one.json()["question"] == "Which folder?"

    respond = f"{waiting.base}/{waiting.approval_id}/respond"
    approved = await http.post(
        respond, json={"decision": "approve", "reason": "ok", "arguments": {"path": "/tmp/y"}}, headers=owner
    )
    assert approved.status_code == 200, approved.text
    answer = approved.json()
    assert answer["state"] == "answered"
    assert answer["response"]["decision"] == "approve"
    assert answer["response"]["arguments"] == {"path": "/tmp/y"}
    assert answer["response"]["responder"] == waiting.agent.owner.email
    again = await http.post(respond, json={"decision": "deny"}, headers=owner)
    assert again.status_code == 409
    assert waiting.agent.owner.email in again.json()["detail"]

    answered = await http.post(
        f"{waiting.base}/{waiting.question_id}/respond", json={"answer": "the blue one"}, headers=owner
    )
    assert answered.status_code == 200 and answered.json()["response"]["decision"] is None
    done = (await http.get(waiting.base, params={"state": "answered"}, headers=owner)).json()
    assert {r["id"] for r in done["data"]} == {waiting.approval_id, waiting.question_id}
    assert (await http.get(waiting.base, headers=owner)).json()["data"] == []


async def test_a_question_is_declined_with_deny_over_rest(
    http: httpx.AsyncClient, api: Api, registry: RegistryClient, once: None
) -> None:
    waiting = await suspend(api, registry)
    owner = waiting.agent.owner.headers
    respond = f"{waiting.base}/{waiting.question_id}/respond"
    declined = await http.post(respond, json={"decision": "deny", "reason": "private"}, headers=owner)
    assert declined.status_code == 200, declined.text
    body = declined.json()
    assert (body["state"], body["response"]["decision"], body["response"]["reason"]) == (
        "answered",
        "deny",
        "private",
    )
    assert body["response"]["answer"] == ""


@pytest.mark.parametrize(
    ("target", "body", "field"),
    [
        ("approval", {"decision": "maybe"}, "decision"),
        ("approval", {"decision": "approve", "colour": "blue"}, "colour"),
        ("approval", {"answer": "yes"}, "response.answer"),
        ("approval", {"decision": "deny", "arguments": {"path": "/"}}, "response.arguments"),
        ("approval", {"decision": "approve", "reason": "r" * 2001}, "reason"),
        ("question", {}, "response.answer"),
        ("question", {"decision": "approve", "answer": "yes"}, "response.decision"),
        ("question", {"decision": "deny", "answer": "yes"}, "response.answer"),
    ],
)
async def test_a_bad_response_is_a_422_naming_the_field(
    http: httpx.AsyncClient,
    api: Api,
    registry: RegistryClient,
    once: None,
    target: str,
    body: dict,
    field: str,
) -> None:
    waiting = await suspend(api, registry)
    request_id = waiting.approval_id if target == "approval" else waiting.question_id
    response = await http.post(
        f"{waiting.base}/{request_id}/respond", json=body, headers=waiting.agent.owner.headers
    )
    assert response.status_code == 422, response.text
    assert field in {violation["field"] for violation in response.json()["field_violations"]}
    still = await http.get(f"{waiting.base}/{request_id}", headers=waiting.agent.owner.headers)
    assert still.json()["state"] == "pending"


async def test_only_the_owner_and_keys_scoped_to_the_project_see_and_answer(
    http: httpx.AsyncClient, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    stranger = await api.user()
    for response in (
        await http.get(waiting.base, headers=stranger.headers),
        await http.get(f"{waiting.base}/{waiting.approval_id}", headers=stranger.headers),
        await http.post(
            f"{waiting.base}/{waiting.approval_id}/respond",
            json={"decision": "approve"},
            headers=stranger.headers,
        ),
        await http.get(f"{waiting.base}/nope", headers=waiting.agent.owner.headers),
    ):
        assert response.status_code == 404, response.text

    owner = waiting.agent.owner
    other_project = await api.project(owner)
    elsewhere = (await create_key(http, owner, project_id=other_project["id"]))["key"]
    assert (await http.get(waiting.base, headers=key_headers(elsewhere))).status_code == 404
    scoped = await create_key(http, owner, project_id=waiting.agent.project_id)
    approved = await http.post(
        f"{waiting.base}/{waiting.approval_id}/respond",
        json={"decision": "deny", "reason": "not today"},
        headers=key_headers(scoped["key"]),
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["response"]["responder"] == f"api-key:{scoped['id']}"
    admin = await api.admin()
    assert (await http.get(waiting.base, headers=admin.headers)).status_code == 200


async def test_concurrent_responses_exactly_one_wins(
    http: httpx.AsyncClient, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    respond = f"{waiting.base}/{waiting.question_id}/respond"
    replies = await asyncio.gather(
        *(
            http.post(respond, json={"answer": f"answer {n}"}, headers=waiting.agent.owner.headers)
            for n in range(6)
        )
    )
    assert sorted(reply.status_code for reply in replies) == [200] + [409] * 5
    (winner,) = [reply.json() for reply in replies if reply.status_code == 200]
    stored = await http.get(f"{waiting.base}/{waiting.question_id}", headers=waiting.agent.owner.headers)
    assert stored.json()["response"]["answer"] == winner["response"]["answer"]


async def test_the_public_grpc_api_serves_them_with_the_same_policy(
    mesh: Mesh, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    project = waiting.agent.project_id
    owner = bearer(waiting.agent.owner.token)
    stranger = bearer((await api.user()).token)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = reg_grpc.RegistryServiceStub(channel)
        listed = await stub.ListInputRequests(
            reg.ListInputRequestsRequest(project_id=project), metadata=owner
        )
        assert [r.id for r in listed.input_requests] == [waiting.approval_id, waiting.question_id]
        got = await stub.GetInputRequest(
            reg.GetInputRequestRequest(project_id=project, id=waiting.question_id), metadata=owner
        )
        assert got.input_request.kind == run_pb2.INPUT_KIND_QUESTION
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ListInputRequests(reg.ListInputRequestsRequest(project_id=project), metadata=stranger)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        respond = reg.RespondToInputRequestRequest(
            project_id=project,
            id=waiting.approval_id,
            response=run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_APPROVE),
        )
        answered = await stub.RespondToInputRequest(respond, metadata=owner)
        assert answered.input_request.state == run_pb2.INPUT_REQUEST_STATE_ANSWERED
        with pytest.raises(grpc.aio.AioRpcError) as second:
            await stub.RespondToInputRequest(respond, metadata=owner)
        assert second.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert waiting.agent.owner.email in (second.value.details() or "")


async def test_a_waiting_run_is_cancelled_over_rest_and_its_requests_closed(
    http: httpx.AsyncClient, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    owner = waiting.agent.owner
    stranger = await api.user()
    cancel = f"{waiting.base}/{waiting.question_id}/cancel-run"
    assert (await http.post(cancel, json={}, headers=stranger.headers)).status_code == 404
    too_long = await http.post(cancel, json={"reason": "x" * 2001}, headers=owner.headers)
    assert too_long.status_code == 422 and "reason" in too_long.text

    scoped = await create_key(http, owner, project_id=waiting.agent.project_id)
    cancelled = await http.post(cancel, json={"reason": "plans changed"}, headers=key_headers(scoped["key"]))
    assert cancelled.status_code == 200, cancelled.text
    body = cancelled.json()
    assert body["run_ids"] == [waiting.question_id.removesuffix("-q")]
    assert body["input_request"]["state"] == "cancelled"
    assert body["input_request"]["response"]["responder"] == f"api-key:{scoped['id']}"
    assert body["input_request"]["response"]["reason"] == "plans changed"

    # Both of the run's requests are closed: a response, or a second cancel, is a 409 saying so.
    for request_id in (waiting.approval_id, waiting.question_id):
        refused = await http.post(
            f"{waiting.base}/{request_id}/respond", json={"decision": "deny"}, headers=owner.headers
        )
        assert refused.status_code == 409 and "cancelled" in refused.text, refused.text
    again = await http.post(cancel, headers=owner.headers)
    assert again.status_code == 409 and "cancelled" in again.text
    listed = await http.get(waiting.base, params={"state": "cancelled"}, headers=owner.headers)
    assert {r["id"] for r in listed.json()["data"]} == {waiting.approval_id, waiting.question_id}


async def test_the_public_grpc_api_cancels_a_waiting_run_with_the_same_policy(
    mesh: Mesh, api: Api, registry: RegistryClient
) -> None:
    waiting = await suspend(api, registry)
    project = waiting.agent.project_id
    cancel = reg.CancelWaitingRunRequest(project_id=project, input_request_id=waiting.approval_id)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = reg_grpc.RegistryServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            await stub.CancelWaitingRun(cancel, metadata=bearer((await api.user()).token))
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        cancelled = await stub.CancelWaitingRun(cancel, metadata=bearer(waiting.agent.owner.token))
        assert cancelled.input_request.state == run_pb2.INPUT_REQUEST_STATE_CANCELLED
        assert len(cancelled.run_ids) == 1
        with pytest.raises(grpc.aio.AioRpcError) as second:
            await stub.CancelWaitingRun(cancel, metadata=bearer(waiting.agent.owner.token))
        assert second.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "cancelled" in (second.value.details() or "")


async def test_the_openapi_schema_describes_the_routes(http: httpx.AsyncClient, once: None) -> None:
    schema = (await http.get("/openapi.json")).json()
    base = "/api/v1/projects/{project_id}/input-requests"
    assert {base, base + "/{request_id}", base + "/{request_id}/respond"} <= set(schema["paths"])
    request_out = schema["components"]["schemas"]["InputRequestOut"]["properties"]
    assert request_out["state"]["enum"] == ["pending", "answered", "expired", "cancelled"]
    assert base + "/{request_id}/cancel-run" in schema["paths"]
    body = schema["components"]["schemas"]["InputResponseIn"]
    assert body.get("additionalProperties") is False


async def test_an_answered_run_is_handed_to_a_live_executor(
    api: Api, registry: RegistryClient, http: httpx.AsyncClient
) -> None:
    """Once the last request is answered the registry offers the run to the next renewal; the
    mesh's own executor takes it (what it then does is the executor's business)."""
    waiting = await suspend(api, registry)
    owner = waiting.agent.owner.headers
    for request_id, body in (
        (waiting.approval_id, {"decision": "approve"}),
        (waiting.question_id, {"answer": "x"}),
    ):
        assert (
            await http.post(f"{waiting.base}/{request_id}/respond", json=body, headers=owner)
        ).status_code == 200

    async def taken() -> bool:
        # Claimed by the next renewal: one run fewer waiting (idle, or working once resumed).
        return await api.status(waiting.agent) != "waiting"

    await eventually(taken, what="a live executor takes the answered run")


async def _asked(http: httpx.AsyncClient, agent: Agent, question: str) -> tuple[str, str]:
    """Has the agent ask `question` in a new session (a chat over the OpenAI-compatible API);
    the session and the request's id."""
    session_id = uuid.uuid4().hex
    body = {"model": agent.model, "session_id": session_id, "messages": [{"role": "user", "content": "go"}]}
    chat = await http.post("/v1/chat/completions", json=body, headers=agent.owner.headers)
    assert chat.status_code == 200 and question in chat.json()["choices"][0]["message"]["content"]
    listed = await http.get(
        f"/api/v1/projects/{agent.project_id}/input-requests",
        params={"session_id": session_id},
        headers=agent.owner.headers,
    )
    [request] = listed.json()["data"]
    return session_id, request["id"]


async def test_respond_streams_the_resumed_run_as_server_sent_events(
    http: httpx.AsyncClient, api: Api
) -> None:
    agent = await asking_agent(api, "Which city?", asks("And which hotel?"), "Booked.")
    session_id, request_id = await _asked(http, agent, "Which city?")
    respond = f"/api/v1/projects/{agent.project_id}/input-requests/{request_id}/respond"
    streaming = {**agent.owner.headers, "Accept": "text/event-stream"}

    first = await http.post(respond, json={"answer": "Lisbon"}, headers=streaming)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"].startswith("text/event-stream")
    events = sse_blocks(first.text)
    assert all(set(e) == {"event", "data"} for e in events), events
    data = [json.loads(e["data"]) for e in events]
    assert all(e["event"] in d for e, d in zip(events, data, strict=True))  # named by its kind
    [result] = [d["tool_result"] for d in data if "tool_result" in d]
    assert (result["name"], result["output"]) == ("ask_user", "Lisbon")
    assert events[-1]["event"] == "run_suspended"  # it asks again
    [asked] = [d["input_requested"]["request"] for d in data if "input_requested" in d]
    assert (asked["kind"], asked["question"], asked["state"]) == ("question", "And which hotel?", "pending")
    assert data[-1]["run_suspended"]["request_ids"] == [asked["id"]]
    assert {d["session_id"] for d in data} == {session_id}

    # Refusals come before any event: plain HTTP errors.
    again = await http.post(respond, json={"answer": "Porto"}, headers=streaming)
    assert again.status_code == 409 and again.headers["content-type"].startswith("application/json")
    second = f"/api/v1/projects/{agent.project_id}/input-requests/{asked['id']}/respond"
    wrong = await http.post(second, json={"decision": "approve"}, headers=streaming)
    assert wrong.status_code == 422, wrong.text

    last = await http.post(second, json={"answer": "The Grand"}, headers=streaming)
    end = sse_blocks(last.text)[-1]
    assert (
        end["event"] == "run_completed" and json.loads(end["data"])["run_completed"]["content"] == "Booked."
    )
