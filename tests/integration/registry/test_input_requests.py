"""Suspended runs and their requests for a person's input (registry `runs/input_requests.py`),
driven as an executor drives them — StartAgentRun, SuspendRun and RenewRunLeases on the internal
service as the system principal — and as people do, through the public RPCs: a suspended run holds
no executor and counts out of the runs in flight (its agent `waiting`), its requests are listed,
read and answered once each, and once none is pending the next renewal of any executor hands the
run out with its answered (or expired) requests. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as reg_pb
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import Principal, TokenCodec
from tests.integration.registry.support import (
    Api,
    Caller,
    Worker,
    bearer,
    rpc_error,
    violation_fields,
)

APPROVAL, QUESTION = run_pb2.INPUT_KIND_APPROVAL, run_pb2.INPUT_KIND_QUESTION
PENDING, ANSWERED, EXPIRED = (
    run_pb2.INPUT_REQUEST_STATE_PENDING,
    run_pb2.INPUT_REQUEST_STATE_ANSWERED,
    run_pb2.INPUT_REQUEST_STATE_EXPIRED,
)
APPROVE, DENY = run_pb2.INPUT_DECISION_APPROVE, run_pb2.INPUT_DECISION_DENY


def moment(at: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(at)
    return stamp


def struct(**values: object) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def approval(request_id: str, *, expires_in: timedelta = timedelta(hours=1), raised: datetime | None = None):
    raised = raised or datetime.now(UTC)
    return run_pb2.InputRequest(
        id=request_id,
        kind=APPROVAL,
        tool="send_email",
        arguments=struct(to="ceo@example.com"),
        question='send_email({"to": "ceo@example.com"})',
        call_id=f"call-{request_id}",
        created_at=moment(raised),
        expires_at=moment(raised + expires_in),
        seq=7,
    )


def question(request_id: str, *, expires_in: timedelta = timedelta(hours=1)) -> run_pb2.InputRequest:
    raised = datetime.now(UTC)
    return run_pb2.InputRequest(
        id=request_id,
        kind=QUESTION,
        question="Which account?",
        call_id=f"call-{request_id}",
        created_at=moment(raised + timedelta(milliseconds=1)),
        expires_at=moment(raised + expires_in),
        delegation_path=["coordinator"],
        seq=9,
    )


def approve(reason: str = "", **arguments: object) -> run_pb2.InputResponse:
    response = run_pb2.InputResponse(decision=APPROVE, reason=reason)
    if arguments:
        response.arguments.CopyFrom(struct(**arguments))
    return response


def answer(text: str) -> run_pb2.InputResponse:
    return run_pb2.InputResponse(answer=text)


async def started(client: RegistryClient, worker: Worker, run_id: str, *, executor: str = "exec-x") -> None:
    await client.start_agent_run(
        worker.agent.id, run_id, session_id=f"session-{run_id}", executor_id=executor, metadata=worker.system
    )


async def suspend(
    client: RegistryClient,
    worker: Worker,
    run_id: str,
    *requests: run_pb2.InputRequest,
    executor: str = "exec-x",
    metadata: tuple[tuple[str, str], ...] | None = None,
) -> list[run_pb2.InputRequest]:
    return await client.suspend_run(
        worker.agent.id,
        run_id,
        executor_id=executor,
        requests=list(requests),
        metadata=worker.system if metadata is None else metadata,
    )


async def renew(client: RegistryClient, worker: Worker, executor: str, **fields: object):
    request = internal_pb.RenewRunLeasesRequest(executor_id=executor, max_orphans=16, **fields)
    return await client.renew_run_leases(request, metadata=worker.system)


async def status(client: RegistryClient, worker: Worker) -> int:
    return (await client.get_agent(worker.project.id, worker.agent.id, metadata=worker.owner.metadata)).status


async def test_a_suspended_run_waits_holding_nothing_and_resumes_once_every_request_is_answered(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "r1")
    assert await status(client, worker) == res.AGENT_STATUS_WORKING
    stored = await client.suspend_run(
        worker.agent.id,
        "r1",
        executor_id="exec-x",
        requests=[approval("r1-a"), question("r1-q")],
        metadata=worker.system,
    )
    assert [(r.id, r.state) for r in stored] == [("r1-a", PENDING), ("r1-q", PENDING)]
    first = stored[0]
    assert (first.project_id, first.session_id, first.run_id, first.agent) == (
        worker.project.id,
        "session-r1",
        "r1",
        worker.agent.slug,
    )
    assert (first.tool, dict(first.arguments), first.call_id, first.seq) == (
        "send_email",
        {"to": "ceo@example.com"},
        "call-r1-a",
        7,
    )
    assert list(stored[1].delegation_path) == ["coordinator"]
    # It holds nothing: not in flight (the agent waits), not its executor's any more.
    assert await status(client, worker) == res.AGENT_STATUS_WAITING
    lost = await renew(
        client, worker, "exec-x", runs=[internal_pb.LeasedRun(agent_id=worker.agent.id, run_id="r1")]
    )
    assert [run.run_id for run in lost.lost] == ["r1"]

    # Listed pending, oldest first, by project and by session, paged.
    owner = worker.owner.metadata
    listed = await client.list_input_requests(worker.project.id, metadata=owner)
    assert [r.id for r in listed.input_requests] == ["r1-a", "r1-q"] and not listed.next_page_token
    by_session = await client.list_input_requests(worker.project.id, session_id="session-r1", metadata=owner)
    assert len(by_session.input_requests) == 2
    other_session = await client.list_input_requests(
        worker.project.id, session_id="elsewhere", metadata=owner
    )
    assert list(other_session.input_requests) == []
    page = await client.list_input_requests(worker.project.id, page_size=1, metadata=owner)
    assert [r.id for r in page.input_requests] == ["r1-a"] and page.next_page_token
    rest = await client.list_input_requests(
        worker.project.id, page_size=1, page_token=page.next_page_token, metadata=owner
    )
    assert [r.id for r in rest.input_requests] == ["r1-q"] and not rest.next_page_token

    # One answered: the run stays parked.
    answered = await client.respond_to_input_request(
        worker.project.id, "r1-a", approve("fine", to="cfo@example.com"), metadata=owner
    )
    assert answered.state == ANSWERED
    assert answered.response.responder == worker.owner.user.email
    assert answered.response.decision == APPROVE and answered.response.reason == "fine"
    assert dict(answered.response.arguments) == {"to": "cfo@example.com"}
    assert answered.response.HasField("responded_at")
    assert list((await renew(client, worker, "exec-y")).orphans) == []
    assert await status(client, worker) == res.AGENT_STATUS_WAITING
    pending = await client.list_input_requests(worker.project.id, metadata=owner)
    assert [r.id for r in pending.input_requests] == ["r1-q"]
    done = await client.list_input_requests(worker.project.id, state=ANSWERED, metadata=owner)
    assert [r.id for r in done.input_requests] == ["r1-a"]

    # The last one answered: the next renewal of any executor takes the run, with both responses.
    await client.respond_to_input_request(worker.project.id, "r1-q", answer("the blue one"), metadata=owner)
    (orphan,) = (await renew(client, worker, "exec-y")).orphans
    assert (orphan.run_id, orphan.session_id, orphan.agent_name) == ("r1", "session-r1", worker.agent.slug)
    assert [(r.id, r.state) for r in orphan.input_requests] == [("r1-a", ANSWERED), ("r1-q", ANSWERED)]
    assert orphan.input_requests[1].response.answer == "the blue one"
    assert list((await renew(client, worker, "exec-z")).orphans) == []
    assert await status(client, worker) == res.AGENT_STATUS_IDLE
    # Resumed, it counts in flight again; its end is a normal finish.
    run = internal_pb.LeasedRun(agent_id=worker.agent.id, run_id="r1")
    await renew(client, worker, "exec-y", runs=[run], resumed=[run])
    assert await status(client, worker) == res.AGENT_STATUS_WORKING
    agent = await client.finish_agent_run(worker.agent.id, "r1", completed=True, metadata=worker.system)
    assert (agent.status, agent.tasks_completed) == (res.AGENT_STATUS_IDLE, 1)


async def test_a_suspension_is_idempotent_and_only_the_runs_holder_may_make_it(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "r2")
    for executor in ("exec-other", ""):
        refused = await rpc_error(suspend(client, worker, "r2", approval("r2-a"), executor=executor))
        assert refused.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)
    refused = await rpc_error(suspend(client, worker, "r2", approval("r2-a"), executor="exec-other"))
    assert (refused.code, refused.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "RUN_NOT_HELD")
    missing = await rpc_error(suspend(client, worker, "nope", approval("n-a")))
    assert missing.code == grpc.StatusCode.NOT_FOUND
    # A user's token may not suspend anything: executors only.
    denied = await rpc_error(suspend(client, worker, "r2", approval("r2-a"), metadata=worker.owner.metadata))
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED

    first = await suspend(client, worker, "r2", approval("r2-a"))
    # A retry whose first answer was lost: the same requests, nothing counted twice.
    again = await suspend(client, worker, "r2", approval("r2-a"))
    assert list(again) == list(first)
    owner = worker.owner.metadata
    await client.respond_to_input_request(worker.project.id, "r2-a", approve(), metadata=owner)
    (orphan,) = (await renew(client, worker, "exec-y")).orphans
    assert orphan.run_id == "r2"
    # The taker resumes it, and the run suspends again raising the same request (as a resumed
    # run replaying its log may): it keeps its response, and the run is handed out at once.
    run = internal_pb.LeasedRun(agent_id=worker.agent.id, run_id="r2")
    await renew(client, worker, "exec-y", runs=[run], resumed=[run])
    (kept,) = await suspend(client, worker, "r2", approval("r2-a"), executor="exec-y")
    assert kept.state == ANSWERED and kept.response.decision == APPROVE
    (orphan,) = (await renew(client, worker, "exec-z")).orphans
    assert [r.state for r in orphan.input_requests] == [ANSWERED]


async def test_bad_suspensions_are_refused_naming_the_field(client: RegistryClient, worker: Worker) -> None:
    await started(client, worker, "r3")

    async def refused(*requests: run_pb2.InputRequest) -> set[str]:
        error = await rpc_error(suspend(client, worker, "r3", *requests))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        return violation_fields(error)

    assert await refused() == {"input_requests"}
    assert await refused(run_pb2.InputRequest(id="k")) == {"input_requests[0].kind"}
    assert await refused(approval(""), approval("x"), approval("x")) == {
        "input_requests[0].id",
        "input_requests[2].id",
    }
    # Nothing was stored or parked.
    assert await status(client, worker) == res.AGENT_STATUS_WORKING


async def test_concurrent_responses_exactly_one_wins_and_the_others_are_told_whose(
    client: RegistryClient, worker: Worker, api: Api
) -> None:
    await started(client, worker, "r4")
    await suspend(client, worker, "r4", approval("r4-a"))
    root = await api.root()
    callers: list[Caller] = [worker.owner, root] * 4
    results = await asyncio.gather(
        *(
            client.respond_to_input_request(worker.project.id, "r4-a", approve(), metadata=caller.metadata)
            for caller in callers
        ),
        return_exceptions=True,
    )
    wins = [r for r in results if isinstance(r, run_pb2.InputRequest)]
    assert len(wins) == 1
    winner = wins[0].response.responder
    assert winner in (worker.owner.user.email, root.user.email)
    for failure in (r for r in results if not isinstance(r, run_pb2.InputRequest)):
        assert getattr(failure, "code", None) == grpc.StatusCode.FAILED_PRECONDITION, failure
        assert failure.reason == "INPUT_ALREADY_ANSWERED"
        assert winner in failure.message
    stored = await client.get_input_request(worker.project.id, "r4-a", metadata=worker.owner.metadata)
    assert stored.response.responder == winner


async def test_an_unanswered_request_expires_into_a_denial_by_the_system(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "r5")
    raised = datetime.now(UTC) - timedelta(hours=2)
    await suspend(
        client,
        worker,
        "r5",
        approval("r5-late", raised=raised, expires_in=timedelta(hours=1)),
        question("r5-q", expires_in=timedelta(hours=1)),
    )
    owner = worker.owner.metadata
    # Past its expiry it reads as expired at once, before any executor came by.
    late = await client.get_input_request(worker.project.id, "r5-late", metadata=owner)
    assert late.state == EXPIRED
    assert (late.response.decision, late.response.responder) == (DENY, "system")
    assert late.response.reason == "expired: nobody responded within 1 hour"
    expired = await client.list_input_requests(worker.project.id, state=EXPIRED, metadata=owner)
    assert [r.id for r in expired.input_requests] == ["r5-late"]
    pending = await client.list_input_requests(worker.project.id, metadata=owner)
    assert [r.id for r in pending.input_requests] == ["r5-q"]
    too_late = await rpc_error(
        client.respond_to_input_request(worker.project.id, "r5-late", approve(), metadata=owner)
    )
    assert (too_late.code, too_late.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INPUT_REQUEST_EXPIRED")
    # Its expiry is due: a claim stores it, but the run still waits for its other request.
    assert list((await renew(client, worker, "exec-y")).orphans) == []
    assert await status(client, worker) == res.AGENT_STATUS_WAITING
    await client.respond_to_input_request(worker.project.id, "r5-q", answer("yes"), metadata=owner)
    (orphan,) = (await renew(client, worker, "exec-y")).orphans
    late, answered = orphan.input_requests
    assert (late.id, late.state, late.response.decision, late.response.responder) == (
        "r5-late",
        EXPIRED,
        DENY,
        "system",
    )
    assert (answered.id, answered.state) == ("r5-q", ANSWERED)


async def test_a_run_whose_only_request_expired_is_handed_out_with_it_denied(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "r6")
    raised = datetime.now(UTC) - timedelta(seconds=90)
    await suspend(client, worker, "r6", approval("r6-a", raised=raised, expires_in=timedelta(seconds=60)))
    (orphan,) = (await renew(client, worker, "exec-y")).orphans
    (request,) = orphan.input_requests
    assert (request.state, request.response.responder) == (EXPIRED, "system")
    assert request.response.reason == "expired: nobody responded within 1 minute"
    assert await status(client, worker) == res.AGENT_STATUS_IDLE


async def test_who_may_see_and_answer_a_projects_requests(
    client: RegistryClient, worker: Worker, api: Api, codec: TokenCodec
) -> None:
    await started(client, worker, "r7")
    await suspend(client, worker, "r7", approval("r7-a"), question("r7-q"))
    project = worker.project.id
    stranger = await api.sign_up()
    for call in (
        client.list_input_requests(project, metadata=stranger.metadata),
        client.get_input_request(project, "r7-a", metadata=stranger.metadata),
        client.respond_to_input_request(project, "r7-a", approve(), metadata=stranger.metadata),
    ):
        assert (await rpc_error(call)).code == grpc.StatusCode.NOT_FOUND
    # A program's key scoped to another project sees this one as it sees unknown ones.
    owner = worker.owner.user
    elsewhere = await api.project(worker.owner)

    async def key_token(scope: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """A real key of the owner's scoped to `scope` (revocation checks that it exists), and the
        token the gateway signs for it."""
        created = await api.stub.CreateApiKey(
            reg_pb.CreateApiKeyRequest(name="program", project_id=scope), metadata=worker.owner.metadata
        )
        key_id = created.api_key.id
        principal = Principal(user_id=owner.id, email=owner.email, api_key_id=key_id, project_scope=scope)
        return key_id, bearer(codec.issue(principal))

    _, scoped_elsewhere = await key_token(elsewhere.id)
    assert (await rpc_error(client.list_input_requests(project, metadata=scoped_elsewhere))).code == (
        grpc.StatusCode.NOT_FOUND
    )
    # Scoped to this project: it answers, recorded as the key.
    key_id, scoped_here = await key_token(project)
    answered = await client.respond_to_input_request(project, "r7-a", approve(), metadata=scoped_here)
    assert answered.response.responder == f"api-key:{key_id}"
    # A superuser may too.
    root = await api.root()
    got = await client.get_input_request(project, "r7-q", metadata=root.metadata)
    assert got.state == PENDING
    unknown = await rpc_error(client.get_input_request(project, "nope", metadata=worker.owner.metadata))
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.NOT_FOUND, "INPUT_REQUEST_NOT_FOUND")


@pytest.mark.parametrize(
    ("request_id", "response", "fields"),
    [
        ("a", run_pb2.InputResponse(), {"response.decision"}),
        ("a", run_pb2.InputResponse(answer="yes"), {"response.decision", "response.answer"}),
        ("a", run_pb2.InputResponse(decision=DENY, arguments=struct(to="x")), {"response.arguments"}),
        ("a", run_pb2.InputResponse(decision=APPROVE, reason="r" * 2001), {"response.reason"}),
        ("a", run_pb2.InputResponse(decision=7), {"response.decision"}),
        ("q", run_pb2.InputResponse(), {"response.answer"}),
        ("q", run_pb2.InputResponse(answer="   "), {"response.answer"}),
        ("q", run_pb2.InputResponse(decision=APPROVE, answer="yes"), {"response.decision"}),
        ("q", run_pb2.InputResponse(answer="x" * (32 * 1024 + 1)), {"response.answer"}),
        ("q", run_pb2.InputResponse(decision=DENY, answer="Lisbon"), {"response.answer"}),
        ("q", run_pb2.InputResponse(decision=DENY, reason="r" * 2001), {"response.reason"}),
    ],
)
async def test_a_response_that_does_not_fit_its_request_is_refused_naming_the_field(
    client: RegistryClient, worker: Worker, request_id: str, response: run_pb2.InputResponse, fields: set[str]
) -> None:
    await started(client, worker, "r8")
    await suspend(client, worker, "r8", approval("a"), question("q"))
    error = await rpc_error(
        client.respond_to_input_request(
            worker.project.id, request_id, response, metadata=worker.owner.metadata
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(error) == fields
    still = await client.get_input_request(worker.project.id, request_id, metadata=worker.owner.metadata)
    assert still.state == PENDING


async def test_a_waiting_agent_pauses_and_resumes_back_to_waiting(
    client: RegistryClient, worker: Worker
) -> None:
    await started(client, worker, "r9")
    await started(client, worker, "r10")
    await suspend(client, worker, "r9", approval("r9-a"))
    # Another run is still in flight: working takes precedence.
    assert await status(client, worker) == res.AGENT_STATUS_WORKING
    await client.finish_agent_run(worker.agent.id, "r10", completed=True, metadata=worker.system)
    assert await status(client, worker) == res.AGENT_STATUS_WAITING
    owner = worker.owner.metadata
    paused = await client.pause_agent(worker.project.id, worker.agent.id, metadata=owner)
    assert paused.status == res.AGENT_STATUS_PAUSED
    resumed = await client.resume_agent(worker.project.id, worker.agent.id, metadata=owner)
    assert resumed.status == res.AGENT_STATUS_WAITING
    metrics = await client.get_agent_metrics(worker.project.id, worker.agent.id, metadata=owner)
    assert (metrics.active_instances, metrics.idle_instances) == (0, 1)
