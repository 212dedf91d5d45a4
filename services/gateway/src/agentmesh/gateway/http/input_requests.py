"""`/api/v1/projects/{project_id}/input-requests`: suspended runs' requests for a person's input
over REST (the project's owner, superusers, API keys scoped to the project), a thin adapter to
the registry's List/Get/RespondToInputRequest. Enums are written as the rest of the REST API writes
them: lower case, without their prefix (`kind: "approval"`, `state: "pending"`,
`decision: "approve"`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.http import convert
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.http.schemas import RequestBody
from agentmesh.gateway.http.sse import EVENT_STREAM, held_stream, run_events
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.runtime.protos import struct, struct_to_dict

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
BASE = "/api/v1/projects/{project_id}/input-requests"

InputKindName = Literal["approval", "question", "client_tool"]
InputStateName = Literal["pending", "answered", "expired", "cancelled"]
DecisionName = Literal["approve", "deny"]
_KIND, _STATE, _DECISION = "INPUT_KIND_", "INPUT_REQUEST_STATE_", "INPUT_DECISION_"


class InputResponseIn(RequestBody):
    """An approval's `decision` (with an optional `reason`, and `arguments` to run the approved
    call with instead of the model's), or a question's `answer`. Who responds is the caller."""

    decision: DecisionName | None = None
    reason: str = Field(default="", max_length=2000, description="why (told to the model on a denial)")
    arguments: dict[str, Any] | None = Field(default=None, description="edited arguments (approve only)")
    answer: str = Field(default="", max_length=32 * 1024, description="a question's answer")


class InputResponseOut(BaseModel):
    decision: DecisionName | None
    reason: str
    answer: str
    arguments: dict[str, Any] | None
    responder: str = Field(description='the user\'s e-mail, "api-key:<key id>", or "system" for an expiry')
    responded_at: datetime | None


class InputRequestOut(BaseModel):
    """A suspended run's request for input: what it asks, where it stands, its one response."""

    id: str
    project_id: str
    session_id: str
    run_id: str
    agent: str = Field(description="the asking agent's slug")
    delegation_path: list[str] = Field(description="the agents that delegated down to it, outermost first")
    kind: InputKindName
    tool: str
    arguments: dict[str, Any] | None
    question: str
    call_id: str
    created_at: datetime | None
    expires_at: datetime | None
    state: InputStateName
    response: InputResponseOut | None
    seq: int = Field(description="memory seq of its input_requested event")


class CancelRunIn(RequestBody):
    """Why the waiting run is cancelled (optional)."""

    reason: str = Field(default="", max_length=2000, description="recorded with the runs' ends")


class CancelledRunOut(BaseModel):
    input_request: InputRequestOut = Field(description="the request, closed (state cancelled)")
    run_ids: list[str] = Field(description="the runs cancelled: the session's waiting run first")


class InputRequestPage(BaseModel):
    data: list[InputRequestOut]
    next_page_token: str = Field(description="token for the next page; empty on the last")


def input_request_out(value: run_pb2.InputRequest) -> InputRequestOut:
    response = value.response if value.HasField("response") else None
    return InputRequestOut(
        id=value.id,
        project_id=value.project_id,
        session_id=value.session_id,
        run_id=value.run_id,
        agent=value.agent,
        delegation_path=list(value.delegation_path),
        kind=convert.enum_name(value.kind, run_pb2.InputKind, _KIND),  # type: ignore[arg-type]
        tool=value.tool,
        arguments=struct_to_dict(value.arguments) if value.HasField("arguments") else None,
        question=value.question,
        call_id=value.call_id,
        created_at=convert.timestamp(value.created_at),
        expires_at=convert.timestamp(value.expires_at),
        state=convert.enum_name(value.state, run_pb2.InputRequestState, _STATE),  # type: ignore[arg-type]
        response=None if response is None else _response_out(response),
        seq=value.seq,
    )


def _response_out(value: run_pb2.InputResponse) -> InputResponseOut:
    decision = None
    if value.decision != run_pb2.INPUT_DECISION_UNSPECIFIED:
        decision = convert.enum_name(value.decision, run_pb2.InputDecision, _DECISION)
    return InputResponseOut(
        decision=decision,  # type: ignore[arg-type]
        reason=value.reason,
        answer=value.answer,
        arguments=struct_to_dict(value.arguments) if value.HasField("arguments") else None,
        responder=value.responder,
        responded_at=convert.timestamp(value.responded_at),
    )


def input_response_proto(body: InputResponseIn) -> run_pb2.InputResponse:
    """The response a body gives (`responder` and the time are the registry's to set)."""
    message = run_pb2.InputResponse(reason=body.reason, answer=body.answer)
    if body.decision is not None:
        message.decision = convert.enum_value(body.decision, run_pb2.InputDecision, _DECISION)
    if body.arguments is not None:
        message.arguments.CopyFrom(struct(body.arguments))
    return message


def input_request_router() -> APIRouter:
    router = APIRouter(prefix=BASE, tags=["requests for input"])

    @router.get("")
    async def list_input_requests(
        project_id: str,
        ctx: Ctx,
        caller: Auth,
        session_id: Annotated[str, Query(max_length=200, description="only this session's")] = "",
        state: Annotated[InputStateName, Query(description="only requests in this state")] = "pending",
        page_size: Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")] = 50,
        page_token: Annotated[str, Query(max_length=4096, description="token from a previous page")] = "",
    ) -> InputRequestPage:
        """The project's requests for a person's input (pending ones unless `state` says
        otherwise), oldest first, paged by `page_token`. A request past its expiry is expired."""
        request = reg.ListInputRequestsRequest(
            project_id=project_id,
            session_id=session_id,
            state=convert.enum_value(state, run_pb2.InputRequestState, _STATE),
            page_size=page_size,
            page_token=page_token,
        )
        response = await ctx.call(ctx.registry.stub.ListInputRequests, request, caller)
        return InputRequestPage(
            data=[input_request_out(item) for item in response.input_requests],
            next_page_token=response.next_page_token,
        )

    @router.get("/{request_id}")
    async def get_input_request(project_id: str, request_id: str, ctx: Ctx, caller: Auth) -> InputRequestOut:
        """One request for input of the project."""
        request = reg.GetInputRequestRequest(project_id=project_id, id=request_id)
        return input_request_out(
            (await ctx.call(ctx.registry.stub.GetInputRequest, request, caller)).input_request
        )

    @router.post(
        "/{request_id}/respond",
        response_model=InputRequestOut,
        responses={
            200: {
                "description": "The request, answered; with `Accept: text/event-stream`, the resumed "
                "run's RunEvents as server-sent events, each named by its kind",
                "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
            }
        },
    )
    async def respond_to_input_request(
        project_id: str, request_id: str, body: InputResponseIn, request: Request, ctx: Ctx, caller: Auth
    ) -> Response | InputRequestOut:
        """Gives the request its one response: `{"decision": "approve"|"deny", "reason"?,
        "arguments"?}` for an approval, `{"answer": "..."}` for a question; the reply is the
        request, answered. Once its run has no request left pending, the run resumes on an
        executor within a lease renewal (about two seconds). With `Accept: text/event-stream`
        the reply is the resumed run instead, as server-sent events (`event:` the RunEvent's
        kind, `data:` the RunEvent as JSON) until its `run_completed` or `run_failed`, or
        `run_suspended` when it asks again (or still waits for its other requests, which it
        sends again first). 409 when it was answered already (the detail names by whom and
        when) or has expired; 422 for a response that does not fit it."""
        response = input_response_proto(body)
        if EVENT_STREAM in request.headers.get("accept", ""):

            async def resumed() -> Response:
                events = await ctx.gateway.respond_to_input(caller, project_id, request_id, response)
                return EventSourceResponse(run_events(events), sep="\n")

            return await held_stream(ctx.guard.streams, caller, resumed)
        answered = await ctx.call(
            ctx.registry.stub.RespondToInputRequest,
            reg.RespondToInputRequestRequest(project_id=project_id, id=request_id, response=response),
            caller,
        )
        return input_request_out(answered.input_request)

    @router.post("/{request_id}/cancel-run", response_model=CancelledRunOut)
    async def cancel_waiting_run(
        project_id: str, request_id: str, ctx: Ctx, caller: Auth, body: CancelRunIn | None = None
    ) -> CancelledRunOut:
        """Cancels the run that waits for this pending request — the session's waiting run (the
        run at the top of the delegations waiting on the request's run), with every waiting run
        below it — instead of answering it. Each run's end is recorded as cancelled by the
        executor that takes it over (within a lease renewal), which frees the session for its
        next message; the request and the runs' other pending requests are closed (state
        `cancelled`: a response to them is refused with 409). 409 when the request is not
        pending (answered, expired or cancelled already)."""
        cancelled = await ctx.call(
            ctx.registry.stub.CancelWaitingRun,
            reg.CancelWaitingRunRequest(
                project_id=project_id, input_request_id=request_id, reason=body.reason if body else ""
            ),
            caller,
        )
        return CancelledRunOut(
            input_request=input_request_out(cancelled.input_request), run_ids=list(cancelled.run_ids)
        )

    return router
