"""The InputRequestStore contract and the claim of a suspended run, over every RegistryStore
implementation (in memory, SQLite, PostgreSQL), on a clock of the test's own: parking counts the run
out of the runs in flight and in the waiting ones, the run is handed out only once no request is
pending, and a request past its expiry is settled into the system's denial by the claim."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentmesh.registry.errors import (
    InputAlreadyAnswered,
    InputRequestExpired,
    InputRequestNotFound,
    RunCancelled,
    RunNotHeld,
)
from agentmesh.registry.models import AgentStatus, PageRequest
from agentmesh.registry.runs.input_models import (
    Cancellation,
    InputDecision,
    InputKind,
    InputRequest,
    InputRequestState,
    InputResponse,
)
from agentmesh.registry.store import RegistryStore, RunLease, Visibility
from tests.integration.registry.test_store_contract import T0, _world

LEASE = timedelta(seconds=5)
HOUR = timedelta(hours=1)


def _raised(request_id: str, agent_id: str, *, expires_at=T0 + HOUR, kind=InputKind.APPROVAL) -> InputRequest:
    return InputRequest(
        id=request_id,
        project_id="",
        agent_id=agent_id,
        agent="",
        session_id="",
        run_id="run-1",
        kind=kind,
        tool="send_email",
        arguments={"to": "ceo@example.com"},
        created_at=T0,
        expires_at=expires_at,
    )


async def _books(store: RegistryStore, agent_id: str) -> tuple[AgentStatus, int, int]:
    async with store.read() as tx:
        agent = await tx.get_agent(agent_id=agent_id)
    assert agent is not None
    return agent.status, agent.runs_in_flight, agent.runs_waiting


async def test_a_parked_run_is_claimed_once_no_request_is_pending(registry_store: RegistryStore) -> None:
    owner, _, project, agent = await _world(registry_store)
    await registry_store.start_run(
        Visibility(owner, everything=False),
        agent.id,
        "run-1",
        T0,
        lease=RunLease("s-1", "exec-x", T0 + LEASE),
    )
    run, inputs, leases = (agent.id, "run-1"), registry_store.input_requests, registry_store.leases
    with pytest.raises(RunNotHeld):
        await inputs.suspend("exec-y", run, [_raised("a", agent.id)], T0)
    due = T0 - timedelta(seconds=1)
    stored = await inputs.suspend(
        "exec-x", run, [_raised("a", agent.id), _raised("late", agent.id, expires_at=due)], T0
    )
    assert [(r.project_id, r.session_id, r.agent) for r in stored] == [(project.id, "s-1", agent.slug)] * 2
    assert await _books(registry_store, agent.id) == (AgentStatus.WAITING, 0, 1)
    # The sweep leaves a parked run be: it is not in flight.
    assert await leases.expire(T0 + HOUR * 10) == 0

    listed = await inputs.list_requests(
        project.id, PageRequest(size=10), state=InputRequestState.PENDING, now=T0, session_id="s-1"
    )
    assert [r.id for r in listed.items] == ["a"]
    # Its expired request is settled by the claim; the other is pending: it stays parked.
    assert await leases.claim("exec-y", T0, T0 + LEASE, 10) == []
    late = await inputs.get_request(project.id, "late")
    assert late is not None and late.state is InputRequestState.EXPIRED
    assert late.response is not None and late.response.decision is InputDecision.DENY
    with pytest.raises(InputRequestExpired):
        await inputs.respond(project.id, "late", InputResponse(decision=InputDecision.APPROVE), T0)

    given = InputResponse(decision=InputDecision.APPROVE, responder="ada@example.com", responded_at=T0)
    answered = await inputs.respond(project.id, "a", given, T0)
    assert answered.state is InputRequestState.ANSWERED
    with pytest.raises(InputAlreadyAnswered, match=r"ada@example\.com"):
        await inputs.respond(project.id, "a", given.model_copy(update={"responder": "bob"}), T0)

    (orphan,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
    assert (orphan.run_id, orphan.session_id) == ("run-1", "s-1")
    assert [(r.id, r.state) for r in orphan.input_requests] == [
        ("a", InputRequestState.ANSWERED),
        ("late", InputRequestState.EXPIRED),
    ]
    assert await _books(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0)
    assert await leases.resume("exec-y", [run], T0, T0 + LEASE) == []
    assert await _books(registry_store, agent.id) == (AgentStatus.WORKING, 1, 0)


async def test_a_run_parked_on_a_run_below_is_claimed_once_that_one_ended(
    registry_store: RegistryStore,
) -> None:
    owner, _, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    for run_id in ("caller", "run-1"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("s-1", "exec-x", T0 + LEASE)
        )
    inputs, leases = registry_store.input_requests, registry_store.leases
    caller = (agent.id, "caller")
    await inputs.suspend("exec-x", (agent.id, "run-1"), [_raised("a", agent.id)], T0)
    await inputs.suspend("exec-x", caller, [], T0, waits_on=["run-1", "gone"])  # "gone": never in flight
    assert await _books(registry_store, agent.id) == (AgentStatus.WAITING, 0, 2)
    # Long after any request's expiry, the caller is not handed out: only an end below does that.
    later = T0 + HOUR * 24 * 365
    given = InputResponse(answer="yes", responder="ada@example.com", responded_at=T0)
    await inputs.respond(project.id, "a", given, T0)
    (asked,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
    assert asked.run_id == "run-1"
    await leases.resume("exec-y", [(agent.id, "run-1")], T0, T0 + LEASE)
    assert await leases.claim("exec-y", later, later + LEASE, 10) == []
    assert await inputs.release_waits(["unrelated"], T0) == 0

    await registry_store.finish_run(visible, agent.id, "run-1", T0, completed=True, tokens_used=0, cost=0.0)
    assert await inputs.release_waits(["run-1"], T0) == 1
    (resumed,) = await leases.claim("exec-z", T0, T0 + LEASE, 10)
    assert (resumed.run_id, resumed.input_requests) == ("caller", ())
    assert await _books(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0)


async def test_a_cancelled_tree_is_handed_out_bottom_up_and_closing_releases_its_callers(
    registry_store: RegistryStore,
) -> None:
    owner, _, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    for run_id in ("top", "middle", "run-1"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("s-1", "exec-x", T0 + LEASE)
        )
    inputs, leases = registry_store.input_requests, registry_store.leases
    await inputs.suspend("exec-x", (agent.id, "run-1"), [_raised("a", agent.id)], T0)
    await inputs.suspend("exec-x", (agent.id, "middle"), [], T0, waits_on=["run-1"])
    await inputs.suspend("exec-x", (agent.id, "top"), [], T0, waits_on=["middle"])
    assert await _books(registry_store, agent.id) == (AgentStatus.WAITING, 0, 3)

    # The worker's request names the tree: cancelled from the top, every run of it.
    cancellation = Cancellation(by="ada@example.com", reason="plans changed")
    closed, cancelled = await inputs.cancel_run(project.id, "a", cancellation, T0)
    assert cancelled == [(agent.id, "top"), (agent.id, "middle"), (agent.id, "run-1")]
    assert closed.state is InputRequestState.CANCELLED and closed.response is not None
    assert (closed.response.responder, closed.response.reason) == ("ada@example.com", "plans changed")
    stored = await inputs.get_request(project.id, "a")
    assert stored is not None and stored.state is InputRequestState.CANCELLED
    with pytest.raises(RunCancelled):
        await inputs.respond(project.id, "a", InputResponse(decision=InputDecision.APPROVE), T0)
    with pytest.raises(RunCancelled):
        await inputs.cancel_run(project.id, "a", cancellation, T0)
    with pytest.raises(InputRequestNotFound):
        await inputs.cancel_run(project.id, "nope", cancellation, T0)

    # Bottom up: only the worker is due; closing it releases the middle, then the top.
    for run_id, caller in (("run-1", "middle"), ("middle", "top"), ("top", None)):
        (orphan,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
        assert (orphan.run_id, orphan.cancelled_by) == (run_id, "ada@example.com: plans changed")
        assert await leases.close("exec-y", [(agent.id, run_id)], T0) == (1 if caller else 0)
    assert await leases.claim("exec-y", T0 + HOUR, T0 + HOUR + LEASE, 10) == []
    assert await _books(registry_store, agent.id) == (AgentStatus.IDLE, 0, 0)
    # The session's turn is free: no run of it is left.
    assert await inputs.cancel_agent_runs(agent.id, cancellation, T0) == []


async def test_an_agents_waiting_runs_are_cancelled_and_its_caller_woken(
    registry_store: RegistryStore,
) -> None:
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    for run_id in ("caller", "run-1"):
        await registry_store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("s-1", "exec-x", T0 + LEASE)
        )
    inputs, leases = registry_store.input_requests, registry_store.leases
    await inputs.suspend("exec-x", (agent.id, "run-1"), [_raised("a", agent.id)], T0)
    await inputs.suspend("exec-x", (agent.id, "caller"), [], T0, waits_on=["run-1"])
    cancelled = await inputs.cancel_agent_runs(agent.id, Cancellation(by="ada@example.com"), T0)
    assert sorted(cancelled) == [(agent.id, "caller"), (agent.id, "run-1")]
    (orphan,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
    assert (orphan.run_id, orphan.cancelled_by) == ("run-1", "ada@example.com")
    assert await leases.close("exec-y", [(agent.id, "run-1")], T0) == 1
    (caller,) = await leases.claim("exec-y", T0, T0 + LEASE, 10)
    assert caller.run_id == "caller" and caller.cancelled_by == "ada@example.com"
