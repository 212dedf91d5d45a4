"""Requests for a person's input, and the runs that wait for them (DESIGN §12).

A run that needs a person — to approve a tool call, or to answer a question — records its
`input_requested` event and suspends: its executor parks it here (`suspend`) and lets it go. The
parked run holds no executor and no slot, counts as neither in flight nor ended (its agent is
`waiting` when no other run is in flight), and keeps its session's turn. People list, read and
answer its requests through any face; the first response to a request counts. Once none of the
run's requests is pending — each answered, or expired into a denial by the system — the run is
handed to a live executor with its next lease renewal (`RenewRunLeases`, as an orphan with its
answered requests), which resumes it from the session's log.

`InputRequests` knows nothing of gRPC; the pure rules are `waiting.py`, the store part
`input_store.py`, and the claim that hands a run out is the lease store's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from agentmesh.registry.agents.watch import AgentWatch
from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.errors import InputRequestNotFound, ProjectNotFound
from agentmesh.registry.models import Page, RunKey
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.runs.input_models import (
    Cancellation,
    InputRequest,
    InputRequestState,
    InputResponse,
    RaisedInput,
)
from agentmesh.registry.runs.waiting import (
    DEFAULT_EXPIRY_SECONDS,
    MAX_REASON_CHARS,
    as_seen,
    response_violations,
)
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.validation import raise_if, required
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

# Requests one suspension may carry (a model's parallel tool calls, each to approve).
MAX_REQUESTS_PER_RUN = 100
MAX_REQUEST_ID_CHARS = 200


class InputRequests:
    """Suspended runs' requests for a person's input: parked by executors, listed, read and
    answered by the project's owner, superusers and API keys scoped to the project."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        clock: Clock = utc_now,
        watch: AgentWatch | None = None,
    ) -> None:
        self._store = store
        self._pages = page_tokens
        self._now = clock
        self._watch = watch  # tells watching executors a run may be ready to go on

    async def suspend(
        self,
        executor_id: str,
        agent_id: str,
        run_id: str,
        requests: Sequence[RaisedInput],
        *,
        waits_on: Sequence[str] = (),
    ) -> list[InputRequest]:
        """Parks the run `executor_id` holds until its requests are answered (see the module's
        docstring): the requests named, as stored — one stored already (the same run suspending
        again after a take-over, or a retry) keeps its state and response. A request raised with
        no time gets now, with no expiry a day from when it was raised. `waits_on`: runs below it
        (its delegated runs, suspended themselves, whose requests they are): it is handed out
        once each has ended."""
        raise_if(_suspension_violations(executor_id, agent_id, run_id, requests, waits_on))
        now = self._now()
        stored = await self._store.input_requests.suspend(
            executor_id,
            (agent_id, run_id),
            [_request(raised, agent_id, run_id, now) for raised in requests],
            now,
            waits_on=waits_on,
        )
        return [as_seen(request, now) for request in stored]

    async def list(
        self,
        principal: Principal,
        project_id: str,
        *,
        session_id: str = "",
        state: InputRequestState = InputRequestState.PENDING,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[InputRequest]:
        """The project's (or one session's) requests in `state`, oldest first."""
        raise_if(required("project_id", project_id))
        await self._visible(principal, project_id)
        scope = f"input-requests:{project_id}:{session_id}:{state.value}"
        page = self._pages.request(page_size=page_size, page_token=page_token, page=0, scope=scope)
        now = self._now()
        found = await self._store.input_requests.list_requests(
            project_id, page, state=state, now=now, session_id=session_id
        )
        listed = self._pages.page(found, scope=scope)
        return listed.model_copy(update={"items": [as_seen(request, now) for request in listed.items]})

    async def get(self, principal: Principal, project_id: str, request_id: str) -> InputRequest:
        raise_if(required("project_id", project_id) + required("id", request_id))
        await self._visible(principal, project_id)
        return as_seen(await self._found(project_id, request_id), self._now())

    async def respond(
        self, principal: Principal, project_id: str, request_id: str, response: InputResponse
    ) -> InputRequest:
        """Gives the request its one response, as the caller (`responder`: the user's e-mail, or
        `api-key:<id>` for a program). InputAlreadyAnswered when it has one already,
        InputRequestExpired past its expiry; INVALID_ARGUMENT for a response that does not fit
        the request's kind."""
        raise_if(required("project_id", project_id) + required("id", request_id))
        await self._visible(principal, project_id)
        request = await self._found(project_id, request_id)
        raise_if(response_violations(request, response))
        now = self._now()
        given = response.model_copy(update={"responder": responder(principal), "responded_at": now})
        answered = await self._store.input_requests.respond(project_id, request_id, given, now)
        if self._watch is not None:
            self._watch.runs_ready()
        return answered

    async def cancel(
        self, principal: Principal, project_id: str, request_id: str, *, reason: str = ""
    ) -> tuple[InputRequest, list[RunKey]]:
        """Cancels the run that waits for a pending request, with the runs waiting above and
        below it (`runs/cancel_store.py`), as the caller — who may, as who may respond: the
        request, closed, and the runs cancelled (top first). A request that is not pending is
        refused as a response to it would be."""
        raise_if(required("project_id", project_id) + required("input_request_id", request_id))
        if len(reason) > MAX_REASON_CHARS:
            raise_if([FieldViolation("reason", f"must be at most {MAX_REASON_CHARS} characters")])
        await self._visible(principal, project_id)
        cancellation = Cancellation(by=responder(principal), reason=reason.strip())
        closed, cancelled = await self._store.input_requests.cancel_run(
            project_id, request_id, cancellation, self._now()
        )
        if cancelled and self._watch is not None:
            self._watch.runs_ready()
        return closed, cancelled

    async def _visible(self, principal: Principal, project_id: str) -> None:
        """ProjectNotFound unless the caller may see the project — and, with an API key scoped to
        one project, unless it is that one (the gateway checks it first; this holds behind it)."""
        if principal.project_scope and principal.project_scope != project_id:
            raise ProjectNotFound("project not found")
        async with self._store.read() as tx:
            await visible_project(tx, principal, project_id)

    async def _found(self, project_id: str, request_id: str) -> InputRequest:
        request = await self._store.input_requests.get_request(project_id, request_id)
        if request is None:
            raise InputRequestNotFound(f"request for input {request_id!r} not found")
        return request


def responder(principal: Principal) -> str:
    """Who a response is recorded as given by: a program's API key, else the user's e-mail."""
    if principal.api_key_id:
        return f"api-key:{principal.api_key_id}"
    return principal.email or principal.user_id


def _request(raised: RaisedInput, agent_id: str, run_id: str, now: datetime) -> InputRequest:
    """The request to store for one raised by the run (the store completes it with the run's
    project, agent slug and session)."""
    created_at = raised.created_at or now
    expires_at = raised.expires_at or created_at + timedelta(seconds=DEFAULT_EXPIRY_SECONDS)
    return InputRequest(
        **raised.model_dump(exclude={"created_at", "expires_at"}),
        project_id="",
        agent_id=agent_id,
        agent="",
        session_id="",
        run_id=run_id,
        created_at=created_at,
        expires_at=expires_at,
    )


def _suspension_violations(
    executor_id: str, agent_id: str, run_id: str, requests: Sequence[RaisedInput], waits_on: Sequence[str]
) -> list[FieldViolation]:
    violations = required("executor_id", executor_id) + required("agent_id", agent_id)
    violations += required("run_id", run_id)
    if not requests and not waits_on:
        violations.append(
            FieldViolation("input_requests", "a suspended run waits for at least one request or run below it")
        )
    if len(waits_on) > MAX_REQUESTS_PER_RUN:
        violations.append(FieldViolation("waits_on_run_ids", f"must hold at most {MAX_REQUESTS_PER_RUN}"))
    for index, child in enumerate(waits_on):
        if not child or child == run_id:
            violations.append(FieldViolation(f"waits_on_run_ids[{index}]", "must name another run"))
    if len(requests) > MAX_REQUESTS_PER_RUN:
        violations.append(FieldViolation("input_requests", f"must hold at most {MAX_REQUESTS_PER_RUN}"))
    seen: set[str] = set()
    for index, request in enumerate(requests):
        if not request.id:
            violations.append(FieldViolation(f"input_requests[{index}].id", "is required"))
        elif len(request.id) > MAX_REQUEST_ID_CHARS:
            violations.append(
                FieldViolation(
                    f"input_requests[{index}].id", f"must be at most {MAX_REQUEST_ID_CHARS} characters"
                )
            )
        elif request.id in seen:
            violations.append(FieldViolation(f"input_requests[{index}].id", "is named twice"))
        seen.add(request.id)
    return violations
