"""The OpenAI-compatible API: chat completions (plain and streamed) and models, at the root
(`model` = `project_slug/agent_name`) and per agent under `/agents/{project_slug}/{agent_name}`.

What an OpenAI client sees is exactly what OpenAI sends: `chat.completion` objects, or
`chat.completion.chunk` server-sent events (role first, text deltas, `finish_reason`, a usage
chunk when `stream_options.include_usage`, then `data: [DONE]`), and OpenAI's error objects. The
content is the addressed agent's answer only; sub-agents' steps travel on gRPC StreamChat and in
memory events. `temperature`, `max_tokens` (or `max_completion_tokens`) and `reasoning_effort`
apply to the chat's run only, without rebuilding the agent; `double_texting` says what happens
when the session's previous message still runs. What of OpenAI's request agents cannot honour is
refused (openai_request.py). A broken stream is picked up by `Last-Event-ID` (sse.py).

How a request becomes a chat — its input, context and session (`chat_call`), and the run started
or resumed (`start_chat`) — is shared with the Responses API (responses.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import ChatStream
from agentmesh.gateway.errors import InvalidRequest, ModelNotFound, TooManyMessages
from agentmesh.gateway.gateway import check_double_texting
from agentmesh.gateway.http.agents import AGENT_BASE, resolve_agent
from agentmesh.gateway.http.client_tools import (
    answer_tool_results,
    check_tool_names,
    client_calls,
    tool_call,
)
from agentmesh.gateway.http.context import HttpContext, authorize, authorize_body, context, until_disconnected
from agentmesh.gateway.http.convert import timestamp
from agentmesh.gateway.http.openai_request import (
    SESSION_HEADER,
    ChatCompletionRequest,
    ChatMessage,
    ClientTools,
    message_text,
)
from agentmesh.gateway.http.sse import (
    LAST_EVENT_ID,
    ChunkShape,
    StreamPosition,
    held_stream,
    live_chunks,
    resumed_chunks,
    usage_body,
)
from agentmesh.gateway.models import AgentRef, Caller, ChatResult
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import InvalidArgument, NotFound

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
SessionHeader = Annotated[str | None, Header(alias=SESSION_HEADER, description="session to continue")]


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    # Not OpenAI's: what the whole delegation tree cost in US dollars; null when unknown (a model
    # called has no price).
    cost: float | None


class FunctionCall(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None = None
    # The client's tools the agent's model called: the run waits for their results.
    tool_calls: list[ToolCall] | None = None


FinishReason = Literal["stop", "length", "tool_calls"]


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: None = None
    finish_reason: FinishReason


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    system_fingerprint: str | None = None


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: ChunkDelta
    logprobs: None = None
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorOut(BaseModel):
    error: OpenAIError


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIErrorOut, "description": "OpenAI error object"}
    for status in (400, 401, 403, 404, 409, 413, 422, 429, 503)
}


def chat_responses(description: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI description of a chat route's answer: JSON, or server-sent events with
    `stream: true`, in the session the response header names."""
    return {
        200: {
            "description": description,
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "headers": {
                SESSION_HEADER: {"description": "the session the chat ran in", "schema": {"type": "string"}}
            },
        },
    }


_COMPLETION_RESPONSES = chat_responses(
    "A chat.completion object, or with `stream: true` server-sent chat.completion.chunk events "
    "ending with `data: [DONE]`"
)


def openai_router() -> APIRouter:
    router = APIRouter(tags=["OpenAI-compatible"], responses=ERROR_RESPONSES)

    @router.post("/v1/chat/completions", response_model=ChatCompletion, responses=_COMPLETION_RESPONSES)
    async def chat_completions(
        body: ChatCompletionRequest,
        request: Request,
        ctx: Ctx,
        caller: Auth,
        x_session_id: SessionHeader = None,
    ) -> Response:
        """Chats with the agent named by `model` (`project_slug/agent_name`)."""
        ref = await model_agent(request, caller, body)
        return await held_if_streamed(
            ctx, caller, bool(body.stream), lambda: _complete(request, ctx, caller, ref, body, x_session_id)
        )

    @router.get("/v1/models")
    async def list_models(ctx: Ctx, caller: Auth) -> ModelList:
        """Every agent the caller may chat with, as a model named `project_slug/agent_name`."""
        return ModelList(data=[model async for model in _visible_models(ctx, caller)])

    @router.get("/v1/models/{project_slug}/{agent_name}")
    async def retrieve_model(project_slug: str, agent_name: str, ctx: Ctx, caller: Auth) -> ModelOut:
        """One agent as a model."""
        return _model(await _resolve_model(ctx, caller, project_slug, agent_name))

    @router.post(
        AGENT_BASE + "/v1/chat/completions", response_model=ChatCompletion, responses=_COMPLETION_RESPONSES
    )
    async def agent_chat_completions(
        project_slug: str,
        agent_name: str,
        body: ChatCompletionRequest,
        request: Request,
        ctx: Ctx,
        caller: Auth,
        x_session_id: SessionHeader = None,
    ) -> Response:
        """Chats with this agent; `model` is ignored."""
        ref = AgentRef(project_slug, agent_name)
        return await held_if_streamed(
            ctx, caller, bool(body.stream), lambda: _complete(request, ctx, caller, ref, body, x_session_id)
        )

    @router.get(AGENT_BASE + "/v1/models")
    async def agent_models(project_slug: str, agent_name: str, ctx: Ctx, caller: Auth) -> ModelList:
        """This agent as the one model of its base URL."""
        return ModelList(data=[_model(await _resolve_model(ctx, caller, project_slug, agent_name))])

    return router


async def _resolve_model(
    ctx: HttpContext, caller: Caller, project_slug: str, agent_name: str
) -> resources_pb2.AgentSpec:
    try:
        return await resolve_agent(ctx, caller, project_slug, agent_name)
    except NotFound:
        raise ModelNotFound(f"{project_slug}/{agent_name}") from None


def _model(spec: resources_pb2.AgentSpec) -> ModelOut:
    return _model_of(spec.project_slug, spec.agent)


def _model_of(project_slug: str, agent: resources_pb2.Agent) -> ModelOut:
    created = timestamp(agent.created_at)
    return ModelOut(
        id=f"{project_slug}/{agent.slug or agent.name}",
        created=int(created.timestamp()) if created else 0,
        owned_by=project_slug,
    )


async def _visible_models(ctx: HttpContext, caller: Caller) -> AsyncIterator[ModelOut]:
    projects = reg.ListProjectsRequest(page_size=1000)
    while True:
        listed = await ctx.call(ctx.registry.stub.ListProjects, projects, caller)
        for project in listed.projects:
            agents = reg.ListAgentsRequest(project_id=project.id, page_size=1000)
            while True:
                page = await ctx.call(ctx.registry.stub.ListAgents, agents, caller)
                for agent in page.agents:
                    if agent.status != resources_pb2.AGENT_STATUS_TERMINATED:
                        yield _model_of(project.slug, agent)
                if not page.next_page_token:
                    break
                agents.page_token = page.next_page_token
        if not listed.next_page_token:
            return
        projects.page_token = listed.next_page_token


async def model_agent(request: Request, caller: Caller, body: Any) -> AgentRef:
    """The agent a root route's request names in `model` (`project_slug/agent_name`), once the
    caller may use it: one the caller may not see is a model that does not exist."""
    if not body.model:
        raise InvalidRequest.field("model", "is required: 'project_slug/agent_name'")
    try:
        ref = AgentRef.parse(body.model, field="model")
        await authorize_body(request, caller, body)
    except (InvalidArgument, NotFound):
        raise ModelNotFound(body.model) from None
    return ref


@dataclass(frozen=True)
class ChatCall:
    """What a chat of an OpenAI-compatible request is, whichever API the request came by: its
    input (and the field it was read from), the conversation a client that keeps no session sent
    before it, the session it continues (`named_session`, "" for a new one) and the settings of
    its run."""

    text: str
    field: str
    session_id: str
    named_session: str
    context: list[executor_service_pb2.ContextMessage]
    model_settings: run_pb2.ModelSettings | None = None
    double_texting: str = ""
    response_format: executor_service_pb2.ResponseFormat | None = None
    client_tools: ClientTools = field(default_factory=ClientTools)


def chat_call(
    ctx: HttpContext,
    messages: Sequence[ChatMessage],
    fields: Sequence[str],
    named_session: str | None,
    *,
    messages_field: str = "messages",
    session_field: str = "session_id",
    model_settings: run_pb2.ModelSettings | None = None,
    double_texting: str = "",
    response_format: executor_service_pb2.ResponseFormat | None = None,
    client_tools: ClientTools | None = None,
) -> ChatCall:
    """The chat of a list of messages (`fields`: where each one's content is in the request,
    `messages_field` where the list is): the last user message is the input; without a named
    session the messages before it are the run's context — the system message and the earlier
    turns a client that keeps no session sends. In a named session the session's log is the
    context: the earlier messages are its turns already, so they are not replayed."""
    if len(messages) > ctx.max_chat_messages:
        raise TooManyMessages(len(messages), ctx.max_chat_messages)
    check_double_texting(double_texting)
    users = [index for index, message in enumerate(messages) if message.role == "user"]
    if not users:
        raise InvalidRequest.field(messages_field, "needs a message with role 'user'")
    index = users[-1]
    text, field = message_text(messages[index]), fields[index]
    ctx.gateway.check_message(text, field=field)
    context = [
        executor_service_pb2.ContextMessage(role=message.role, content=message_text(message))
        for message in ([] if named_session else messages[:index])
        if message_text(message)
    ]
    return ChatCall(
        text=text,
        field=field,
        session_id=ctx.gateway.session_id(named_session, field=session_field),
        named_session=named_session or "",
        context=context,
        model_settings=model_settings,
        double_texting=double_texting,
        response_format=response_format,
        client_tools=client_tools or ClientTools(),
    )


async def start_chat(
    request: Request, ctx: HttpContext, caller: Caller, ref: AgentRef, call: ChatCall
) -> ChatStream:
    """Starts the chat, once its run has started (or resumed): a refused chat gets its own status
    before any response does. The session's run waiting for input takes the message as its answer
    and goes on; otherwise the message starts a run. A client that goes away first cancels it."""

    async def begin() -> ChatStream:
        if call.named_session:
            answering = await ctx.gateway.answer_chat(
                caller, ref, call.session_id, call.text, field=call.field
            )
            if answering is not None:
                return answering
        return await ctx.gateway.start_chat(
            caller,
            ref,
            call.text,
            call.session_id,
            model_settings=call.model_settings,
            double_texting=call.double_texting,
            context=call.context,
            response_format=call.response_format,
            client_tools=call.client_tools.tools,
            client_tool_choice=call.client_tools.choice,
        )

    await check_tool_names(ctx, caller, ref, call.client_tools)
    try:
        return await until_disconnected(request, begin())
    except NotFound as error:
        raise ModelNotFound(str(ref)) from error


async def held_if_streamed(
    ctx: HttpContext, caller: Caller, streamed: bool, complete: Callable[[], Awaitable[Response]]
) -> Response:
    """A completion or response; a streamed one holds a stream slot of its caller and project from
    before its chat starts to its stream's end."""
    if not streamed:
        return await complete()
    return await held_stream(ctx.guard.streams, caller, complete)


async def _complete(
    request: Request,
    ctx: HttpContext,
    caller: Caller,
    ref: AgentRef,
    body: ChatCompletionRequest,
    header_session: str | None,
) -> Response:
    if last_event_id := request.headers.get(LAST_EVENT_ID):
        session_id = header_session or body.session_id
        return await _resume(request, ctx, caller, ref, body, session_id, last_event_id)
    body.check_honoured()
    named_session = header_session or body.session_id
    if results := body.tool_results():
        chat = await answer_tool_results(request, ctx, caller, ref, results, named_session)
    else:
        call = chat_call(
            ctx,
            body.messages,
            [f"messages[{index}].content" for index in range(len(body.messages))],
            named_session,
            model_settings=body.model_settings(),
            double_texting=body.double_texting or "",
            response_format=body.answer_format(),
            client_tools=body.client_tools(),
        )
        chat = await start_chat(request, ctx, caller, ref, call)
    headers = {SESSION_HEADER: chat.session_id}
    created = int(time.time())
    model = str(ref)
    if not body.stream:
        result = await until_disconnected(request, chat.result_at_end())
        completion = ChatCompletion(
            id=f"chatcmpl-{result.run_id}",
            created=created,
            model=model,
            choices=[Choice(index=0, **_message(result))],
            usage=_usage(result.usage or run_pb2.Usage()),
        )
        return JSONResponse(completion.model_dump(mode="json"), headers=headers)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    shape = ChunkShape(f"chatcmpl-{chat.run_id}", created, model, include_usage)
    return EventSourceResponse(live_chunks(chat, shape), headers=headers, sep="\n")


async def _resume(
    request: Request,
    ctx: HttpContext,
    caller: Caller,
    ref: AgentRef,
    body: ChatCompletionRequest,
    session_id: str | None,
    last_event_id: str,
) -> Response:
    """A streamed completion picked up by `Last-Event-ID` (sse.py): the rest, from the log."""
    position = StreamPosition.parse(last_event_id)
    if not session_id:
        raise InvalidRequest.field(
            "session_id", f"is required with {LAST_EVENT_ID} (or header {SESSION_HEADER})"
        )
    if not body.stream:
        raise InvalidRequest.field("stream", f"must be true with {LAST_EVENT_ID}")
    try:
        events = await until_disconnected(
            request,
            ctx.gateway.resume_chat(caller, ref, session_id, after_seq=position.seq, run_id=position.run_id),
        )
    except NotFound as error:
        raise ModelNotFound(str(ref)) from error
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    shape = ChunkShape(f"chatcmpl-{position.run_id}", int(time.time()), str(ref), include_usage)
    return EventSourceResponse(
        resumed_chunks(events, position, shape), headers={SESSION_HEADER: session_id}, sep="\n"
    )


def _message(result: ChatResult) -> dict[str, Any]:
    """A completion's message and why it finished: the answer; or, when the run waits for the
    client's tools, their calls (and the text of what else it asks, if anything)."""
    if calls := client_calls(result.input_requests):
        tool_calls = [ToolCall.model_validate(tool_call(request)) for request in calls]
        message = AssistantMessage(content=result.content or None, tool_calls=tool_calls)
        return {"message": message, "finish_reason": "tool_calls"}
    finish = "length" if result.max_steps_reached else "stop"
    return {"message": AssistantMessage(content=result.content), "finish_reason": finish}


def _usage(usage: run_pb2.Usage) -> CompletionUsage:
    return CompletionUsage(**usage_body(usage))
