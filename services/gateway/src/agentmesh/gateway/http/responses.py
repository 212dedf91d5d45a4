"""OpenAI's Responses API (`POST /v1/responses`), at the root (`model` = `project_slug/agent_name`)
and per agent under `/agents/{project_slug}/{agent_name}`: what the OpenAI Agents SDK's default
model and `client.responses.create` speak.

A response is a chat, started as a chat completion starts (openai.py: the same access rules,
limits, session and run); what differs is the request's spelling (responses_request.py) and the
answer's: a `response` object with one `message` output item of `output_text`, or with `stream`
OpenAI's semantic server-sent events (`response.created` … `response.output_text.delta` …
`response.completed`), each with its `sequence_number`. A run stopped at its step limit is an
`incomplete` response (`max_output_tokens`), as a cut-off answer is on OpenAI. A run that fails
before any of the answer was sent is the HTTP error a chat completion gets for it (the client
raises it, as it does any refusal); on a stream, once events were sent, it is `response.failed`.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import ChatStream
from agentmesh.gateway.errors import (
    InvalidRequest,
    ModelNotFound,
    PreviousResponseNotFound,
)
from agentmesh.gateway.http.agents import AGENT_BASE, resolve_agent
from agentmesh.gateway.http.client_tools import answer_tool_results, arguments_json, client_calls
from agentmesh.gateway.http.context import HttpContext, until_disconnected
from agentmesh.gateway.http.errors import openai_error_body
from agentmesh.gateway.http.openai import (
    ERROR_RESPONSES,
    Auth,
    Ctx,
    SessionHeader,
    chat_call,
    chat_responses,
    held_if_streamed,
    model_agent,
    start_chat,
)
from agentmesh.gateway.http.openai_request import SESSION_HEADER
from agentmesh.gateway.http.response_reads import FoundResponse, Status, found_response
from agentmesh.gateway.http.responses_request import ResponseId, ResponseRequest
from agentmesh.gateway.http.sse import usage_body
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.runtime.errors import DomainError, NotFound


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] = []


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    status: Literal["in_progress", "completed", "incomplete"]
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class FunctionCallItem(BaseModel):
    """A call of one of the client's function tools: the run waits for its output."""

    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    arguments: str
    status: Literal["in_progress", "completed"] = "completed"


class InputTokensDetails(BaseModel):
    cached_tokens: int


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int
    # Not OpenAI's: what the whole delegation tree cost in US dollars; null when unknown.
    cost: float | None


class ResponseError(BaseModel):
    code: str | None
    message: str


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"] = "max_output_tokens"


class ResponseObject(BaseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Status
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    model: str
    output: list[OutputMessage | FunctionCallItem]
    usage: ResponseUsage | None = None
    # The request's own settings, echoed as OpenAI echoes them.
    instructions: str | None = None
    previous_response_id: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    reasoning: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    user: str | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[Any] = []
    parallel_tool_calls: bool = True
    background: bool = False
    text: dict[str, Any] = {"format": {"type": "text"}}
    truncation: str = "disabled"
    top_p: float | None = None


_RESPONSE_RESPONSES = chat_responses(
    "A response object, or with `stream: true` OpenAI's server-sent response events, from "
    "response.created to response.completed"
)


def responses_router() -> APIRouter:
    router = APIRouter(tags=["OpenAI-compatible"], responses=ERROR_RESPONSES)

    @router.post("/v1/responses", response_model=ResponseObject, responses=_RESPONSE_RESPONSES)
    async def create_response(
        body: ResponseRequest, request: Request, ctx: Ctx, caller: Auth, x_session_id: SessionHeader = None
    ) -> Response:
        """Answers with the agent named by `model` (`project_slug/agent_name`)."""
        ref = await model_agent(request, caller, body)
        return await held_if_streamed(
            ctx, caller, bool(body.stream), lambda: _respond(request, ctx, caller, ref, body, x_session_id)
        )

    @router.post(AGENT_BASE + "/v1/responses", response_model=ResponseObject, responses=_RESPONSE_RESPONSES)
    async def agent_create_response(
        project_slug: str,
        agent_name: str,
        body: ResponseRequest,
        request: Request,
        ctx: Ctx,
        caller: Auth,
        x_session_id: SessionHeader = None,
    ) -> Response:
        """Answers with this agent; `model` is ignored."""
        ref = AgentRef(project_slug, agent_name)
        return await held_if_streamed(
            ctx, caller, bool(body.stream), lambda: _respond(request, ctx, caller, ref, body, x_session_id)
        )

    @router.get("/v1/responses/{response_id}", response_model=ResponseObject)
    async def retrieve_response(response_id: str, request: Request, ctx: Ctx, caller: Auth) -> ResponseObject:
        """The response, read back from its run's events: as the create call answered it, or as
        its run stands now (`in_progress`, or answered since). Its project is the API key's,
        or its session's."""
        return read_back(await found_response(request, ctx, caller, response_id))

    @router.get(AGENT_BASE + "/v1/responses/{response_id}", response_model=ResponseObject)
    async def agent_retrieve_response(
        project_slug: str, agent_name: str, response_id: str, request: Request, ctx: Ctx, caller: Auth
    ) -> ResponseObject:
        """One of this agent's responses, read back as on the root route."""
        return read_back(
            await found_response(request, ctx, caller, response_id, AgentRef(project_slug, agent_name))
        )

    return router


def read_back(found: FoundResponse) -> ResponseObject:
    """A response read back, shaped as the create call shapes it."""
    at, recorded = found.at, found.recorded
    shape = ResponseShape(
        None, created_at=recorded.created_at, model=f"{found.project_slug}/{recorded.agent}"
    )
    error = None
    if recorded.status in ("failed", "cancelled"):
        error = ResponseError(code=recorded.error_code, message=recorded.error_message)
    return shape.response(
        at, recorded.status, recorded.text, recorded.usage, error=error, calls=recorded.calls
    )


async def _respond(
    request: Request,
    ctx: HttpContext,
    caller: Caller,
    ref: AgentRef,
    body: ResponseRequest,
    header_session: str | None,
) -> Response:
    body.check_honoured()
    previous = body.previous()
    if previous and header_session and header_session != previous.session_id:
        raise InvalidRequest.field(
            "previous_response_id", f"is a response of another session than {SESSION_HEADER} names"
        )
    messages, fields = body.messages()
    named_session = previous.session_id if previous else header_session
    shape = ResponseShape(body, created_at=int(time.time()), model=str(ref))
    if results := body.tool_results():
        chat = await answer_tool_results(request, ctx, caller, ref, results, named_session)
    else:
        call = chat_call(
            ctx,
            messages,
            fields,
            named_session,
            messages_field="input",
            session_field="previous_response_id" if previous else SESSION_HEADER,
            model_settings=body.model_settings(),
            double_texting=body.double_texting or "",
            response_format=body.answer_format(),
            client_tools=body.client_tools(),
        )
        if previous:
            await _check_previous(ctx, caller, ref, previous)
        chat = await start_chat(request, ctx, caller, ref, call)
    headers = {SESSION_HEADER: chat.session_id}
    if body.stream:
        return EventSourceResponse(_events(chat, shape), headers=headers, sep="\n")
    result = await until_disconnected(request, chat.result_at_end())
    ended: Status = "incomplete" if result.max_steps_reached else "completed"
    calls = client_calls(result.input_requests)
    response = shape.response(
        _place(chat),
        ended,
        result.content or (None if calls else ""),
        result.usage or run_pb2.Usage(),
        calls=calls,
    )
    return JSONResponse(response.model_dump(mode="json"), headers=headers)


async def _check_previous(ctx: HttpContext, caller: Caller, ref: AgentRef, previous: ResponseId) -> None:
    """Raises PreviousResponseNotFound unless the previous response's run is in its session, in
    the agent's project: an id made up, mistyped or from another project would otherwise start
    a new, empty session under that name. Its newest events are read first: a session's latest
    response is the one usually continued."""
    try:
        spec = await resolve_agent(ctx, caller, ref.project_slug, ref.agent_name)
    except NotFound:
        raise ModelNotFound(str(ref)) from None
    listing = memory_service_pb2.ListEventsRequest(
        session_id=previous.session_id,
        project_id=spec.agent.project_id,
        run_id=previous.run_id,
        page_size=1,
        descending=True,
    )
    try:
        found = (await ctx.memory.list_events(listing, metadata=caller.metadata)).events
    except NotFound:  # no such session
        found = []
    if not found:
        raise PreviousResponseNotFound(str(previous))


@dataclass(frozen=True)
class ResponseShape:
    """What every response object of one request carries besides its output: the request's own
    settings, echoed (OpenAI's defaults for a response read back, whose request is not kept),
    and when and by whom it was made."""

    request: ResponseRequest | None
    created_at: int
    model: str

    def response(
        self,
        at: ResponseId,
        status: Status,
        text: str | None = None,
        usage: run_pb2.Usage | None = None,
        error: ResponseError | None = None,
        calls: Sequence[run_pb2.InputRequest] = (),
    ) -> ResponseObject:
        """The response of the run `at` names: its text as its message (none when None), and
        the calls of the client's tools its run waits for."""
        output: list[OutputMessage | FunctionCallItem] = (
            [] if text is None else [message_item(at, status, text)]
        )
        output += [function_call_item(request) for request in calls]
        response = ResponseObject(
            id=str(at),
            created_at=self.created_at,
            status=status,
            error=error,
            incomplete_details=IncompleteDetails() if status == "incomplete" else None,
            model=self.model,
            output=output,
            usage=response_usage(usage) if usage else None,
        )
        if (body := self.request) is None:
            return response
        return response.model_copy(
            update={
                "instructions": body.instructions,
                "previous_response_id": body.previous_response_id,
                "max_output_tokens": body.max_output_tokens,
                "temperature": body.temperature,
                "reasoning": {"effort": body.reasoning.effort, "summary": None} if body.reasoning else None,
                "metadata": (body.model_extra or {}).get("metadata"),
                "user": (body.model_extra or {}).get("user"),
                "tool_choice": body.tool_choice or "auto",
            }
        )


def _place(chat: ChatStream) -> ResponseId:
    """The response a chat answers: its run, in its session."""
    return ResponseId(chat.run_id, chat.session_id)


def response_error(error: DomainError) -> ResponseError:
    """A failed response's `error`: the code and message the same failure has as an HTTP error."""
    failure = openai_error_body(error)["error"]
    return ResponseError(code=failure["code"], message=failure["message"])


def message_item(at: ResponseId, status: Status, text: str) -> OutputMessage:
    """The response's one message item: the agent's answer."""
    item_status = status if status in ("in_progress", "completed") else "incomplete"
    return OutputMessage(id=f"msg_{at.run_id}", status=item_status, content=[OutputText(text=text)])


def function_call_item(request: run_pb2.InputRequest) -> FunctionCallItem:
    """A call of the client's tool the run waits for: its `call_id` is its request's id, which the
    client's `function_call_output` names."""
    return FunctionCallItem(
        id=f"fc_{request.id}", call_id=request.id, name=request.tool, arguments=arguments_json(request)
    )


def response_usage(usage: run_pb2.Usage) -> ResponseUsage:
    """OpenAI's response `usage` (the whole delegation tree's tokens, and `cost` beside them)."""
    counted = usage_body(usage)
    return ResponseUsage(
        input_tokens=counted["prompt_tokens"],
        input_tokens_details=InputTokensDetails(
            cached_tokens=counted["prompt_tokens_details"]["cached_tokens"]
        ),
        output_tokens=counted["completion_tokens"],
        output_tokens_details=OutputTokensDetails(),
        total_tokens=counted["total_tokens"],
        cost=counted["cost"],
    )


async def _events(chat: ChatStream, shape: ResponseShape) -> AsyncIterator[dict[str, str]]:
    """A streamed response's server-sent events, each named by its type and numbered. The message
    item opens with the answer's first text: a run that only calls the client's tools streams
    their calls alone, as the plain response holds them (a message item opens, empty, only for an
    answer that is empty). Leaving early (the client went away) closes the run's stream, which
    cancels the run below."""
    numbers = itertools.count()

    def event(kind: str, **data: Any) -> dict[str, str]:
        body = {"type": kind, "sequence_number": next(numbers), **data}
        return {"event": kind, "data": json.dumps(body)}

    def dumped(model: BaseModel) -> dict[str, Any]:
        return model.model_dump(mode="json")

    place = _place(chat)
    at = {"item_id": f"msg_{chat.run_id}", "output_index": 0, "content_index": 0}

    def opened() -> list[dict[str, str]]:
        item = message_item(place, "in_progress", "").model_copy(update={"content": []})
        return [
            event("response.output_item.added", output_index=0, item=dumped(item)),
            event("response.content_part.added", **at, part=dumped(OutputText(text=""))),
        ]

    text: str | None = None  # None until the message item opens
    try:
        yield event("response.created", response=dumped(shape.response(place, "in_progress")))
        yield event("response.in_progress", response=dumped(shape.response(place, "in_progress")))
        async for delta in chat.answer():
            if text is None:
                text = ""
                for opening in opened():
                    yield opening
            text += delta
            yield event("response.output_text.delta", **at, delta=delta, logprobs=[])
        result = chat.result
        ended: Status = "incomplete" if result.max_steps_reached else "completed"
        calls = client_calls(result.input_requests)
        if text is None and not calls:
            text = ""
            for opening in opened():
                yield opening
        if text is not None:
            yield event("response.output_text.done", **at, text=text, logprobs=[])
            yield event("response.content_part.done", **at, part=dumped(OutputText(text=text)))
            yield event(
                "response.output_item.done", output_index=0, item=dumped(message_item(place, ended, text))
            )
        for index, request in enumerate(calls, start=0 if text is None else 1):
            call = function_call_item(request)
            added = call.model_copy(update={"arguments": "", "status": "in_progress"})
            yield event("response.output_item.added", output_index=index, item=dumped(added))
            where = {"item_id": call.id, "output_index": index}
            yield event("response.function_call_arguments.delta", **where, delta=call.arguments)
            yield event("response.function_call_arguments.done", **where, arguments=call.arguments)
            yield event("response.output_item.done", output_index=index, item=dumped(call))
        response = shape.response(place, ended, text, result.usage or run_pb2.Usage(), calls=calls)
        yield event(f"response.{ended}", response=dumped(response))
    except DomainError as error:
        yield event(
            "response.failed",
            response=dumped(shape.response(place, "failed", text or None, error=response_error(error))),
        )
    finally:
        await chat.aclose()
