"""A project's agents as an MCP server (docs/mcp-server.md): streamable HTTP at
`/mcp/projects/{project_id}`, and at `/mcp` for an API key scoped to one project.

Each agent of the project that is not terminated is a tool named by its slug, taking a `message`
and an optional `session_id`. Calling it is a chat with the agent, as on every other face
(`AgentGateway`: the same executors' leases, the project's limits and budgets, the same trace);
while the run goes on, each step, tool call, delegation and request for input is an MCP progress
notification (when the client sent a progress token), and the tool's result is the agent's answer
with the session in its structured content, so the caller can go on in that session. A run that
fails is a tool result with `isError`. One that waits for a person's input is, to a client that
can ask its user (2026-07-28, elicitation), an `input_required` result eliciting the request, and
the retried call's reply answers it; to any other client, a result saying what it asks and how to
answer: call the tool again in the session with the answer as the message.

The official MCP SDK serves the protocol, stateless: every POST is served on its own (either
protocol revision; no session to keep), so any gateway replica answers any request. The routes
here only apply the gateway's policy first — the bearer token or API key, the project's owner,
the requests a minute — and hand the request, with who made it, to the SDK.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import mcp_types as types
from fastapi import APIRouter, Depends, FastAPI, Request
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.budget import current_budget
from agentmesh.gateway.chat_stream import ChatStream
from agentmesh.gateway.errors import InvalidRequest
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import AgentRef, Caller, ChatResult
from agentmesh.gateway.policy import ProjectTarget
from agentmesh.gateway.project_limits import LimitsInForce, admitted_project
from agentmesh.gateway.version import VERSION
from agentmesh.registry.client import AgentNotFound, ProjectNotFound
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError

MCP_PATH = "/mcp"
# An approval's decisions, as a person replies them (answers.py).
_DECISIONS = ("approve", "deny")
# An agent that is not there, whichever service found it missing.
_NO_SUCH_TOOL = (AgentNotFound.default_reason, ProjectNotFound.default_reason)
MCP_PROJECT_PATH = "/mcp/projects/{project_id}"

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]

# Every agent's tool takes the same arguments.
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask or tell the agent."},
        "session_id": {
            "type": "string",
            "description": "Continue a conversation: the session_id an earlier answer of this agent "
            "returned. Leave it out to start a new one.",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class McpCall:
    """One MCP request as the policy admitted it: who made it, the project it is served for, and
    what the request's context held (its budget, the project's limits in force), which the SDK's
    handler task does not inherit."""

    caller: Caller
    project_id: str
    budget: run_pb2.Budget | None
    limits: LimitsInForce | None

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        budget = current_budget.set(self.budget)
        limits = admitted_project.set(self.limits)
        try:
            yield
        finally:
            admitted_project.reset(limits)
            current_budget.reset(budget)


class AgentTools:
    """The MCP server of a project's agents: the SDK's `Server` with a tool per agent, behind a
    stateless streamable HTTP session manager (which runs for as long as the HTTP app does)."""

    def __init__(self, ctx: HttpContext) -> None:
        self._ctx = ctx
        self.server: Server[Any] = Server(
            "agentmesh",
            version=VERSION,
            title="agentmesh agents",
            instructions="Each tool is an agent of this agentmesh project: call it with a message; "
            "pass the session_id of its answer to continue the conversation.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            # Every tool has the same schema: the SDK checks a call's headers against it without
            # listing the project's agents first.
            get_tool_input_schema=lambda name: INPUT_SCHEMA,
        )
        # Requests carry their credentials already: the SDK's own DNS-rebinding guard (meant for
        # unauthenticated local servers) is left off, as for every other route of the gateway.
        self.sessions = StreamableHTTPSessionManager(self.server, stateless=True)

    @contextlib.asynccontextmanager
    async def running(self, app: FastAPI) -> AsyncIterator[None]:
        async with self.sessions.run():
            yield

    async def serve(self, call: McpCall, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("state", {})["mcp_call"] = call
        await self.sessions.handle_request(scope, receive, send)

    # The SDK's handlers.

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        call = _admitted(ctx)
        agents = [agent async for agent in self._agents(call)]
        type_ids = sorted({agent.agent_type_id for agent in agents})
        descriptions = {type_id: await self._type_description(call, type_id) for type_id in type_ids}
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=agent.slug,
                    title=agent.name,
                    description=descriptions[agent.agent_type_id] or f"the agent {agent.name}",
                    input_schema=INPUT_SCHEMA,
                )
                for agent in agents
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        call = _admitted(ctx)
        arguments = params.arguments or {}
        message, session = arguments.get("message"), arguments.get("session_id")
        if params.request_state and params.input_responses:
            # The retry of a call whose run asked its client's user (`_asking`): the user's reply
            # answers the run's request, in the session the state names.
            message, session = _reply(params.input_responses), params.request_state
        progress = _Progress(ctx)
        try:
            if not isinstance(message, str):
                raise InvalidRequest.field("message", "is required: a string")
            if session is not None and not isinstance(session, str):
                raise InvalidRequest.field("session_id", "must be a string")
            with call.applied(), self._ctx.guard.streams.holding(call.caller.user_id):
                chat = await self._start(call, params.name, message, session)
                result = await chat.result_at_end(seen=progress.seen)
        except DomainError as error:
            if error.reason in _NO_SUCH_TOOL:
                # A tool the project does not have (or no longer has): the protocol's error.
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}") from None
            return _failed(error)
        asking = _asking(ctx, result)
        return asking or _answered(params.name, result)

    async def _start(self, call: McpCall, tool: str, message: str, session: str | None) -> ChatStream:
        """The chat of a tool call: in a named session whose run waits for input the message
        answers it and the run goes on; otherwise it starts a run."""
        gateway, caller = self._ctx.gateway, call.caller
        session_id = gateway.session_id(session)
        gateway.check_message(message)
        ref = AgentRef(await self._project_slug(call), tool)
        if session:
            answering = await gateway.answer_chat(caller, ref, session_id, message)
            if answering is not None:
                return answering
        return await gateway.start_chat(caller, ref, message, session_id)

    # The registry, as the caller.

    async def _project_slug(self, call: McpCall) -> str:
        request = reg.GetProjectRequest(id=call.project_id)
        return (await self._ctx.call(self._ctx.registry.stub.GetProject, request, call.caller)).project.slug  # type: ignore[no-any-return]

    async def _agents(self, call: McpCall) -> AsyncIterator[resources_pb2.Agent]:
        request = reg.ListAgentsRequest(project_id=call.project_id, page_size=1000)
        while True:
            page = await self._ctx.call(self._ctx.registry.stub.ListAgents, request, call.caller)
            for agent in page.agents:
                if agent.status != resources_pb2.AGENT_STATUS_TERMINATED:
                    yield agent
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    async def _type_description(self, call: McpCall, type_id: str) -> str:
        request = reg.GetAgentTypeRequest(id=type_id)
        found = await self._ctx.call(self._ctx.registry.stub.GetAgentType, request, call.caller)
        return found.agent_type.description  # type: ignore[no-any-return]


class _Progress:
    """A run's steps as MCP progress notifications: a count that grows with each, and what it is.
    Nothing is sent unless the client asked for progress (the SDK drops it otherwise)."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._count = 0

    async def seen(self, event: run_pb2.RunEvent) -> None:
        said = _progress_message(event)
        if said is None:
            return
        self._count += 1
        await self._ctx.session.report_progress(self._count, None, said)


def _progress_message(event: run_pb2.RunEvent) -> str | None:
    who = event.agent or "agent"
    kind = event.WhichOneof("kind")
    if kind == "step_started":
        return f"{who}: step {event.step_started.step}"
    if kind == "tool_call":
        return f"{who}: calling {event.tool_call.name}"
    if kind == "delegation_request":
        return f"{who}: asking {event.delegation_request.target_agent}"
    if kind == "input_requested":
        return f"{who}: waiting for input"
    return None


def _admitted(ctx: ServerRequestContext[Any]) -> McpCall:
    call = getattr(getattr(ctx.request, "state", None), "mcp_call", None)
    if not isinstance(call, McpCall):  # only the gateway's routes hand requests to the SDK
        raise MCPError(code=types.INTERNAL_ERROR, message="request not admitted")
    return call


def _answered(tool: str, result: ChatResult) -> types.CallToolResult:
    """The agent's answer; or, when its run waits for a person, what it asks and how to answer."""
    structured: dict[str, Any] = {"session_id": result.session_id, "run_id": result.run_id}
    if not result.input_requests:
        return types.CallToolResult(
            content=[types.TextContent(text=result.content)],
            structured_content={**structured, "status": "completed"},
        )
    asked = [
        {
            "id": request.id,
            "kind": "question" if request.kind == run_pb2.INPUT_KIND_QUESTION else "approval",
            "question": request.question,
        }
        for request in result.input_requests
    ]
    text = (
        f"The agent is waiting for input.\n\n{result.content}\n\nTo answer, call {tool} again with "
        f'session_id "{result.session_id}" and the answer as the message (approve or deny for an approval).'
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content={**structured, "status": "input_required", "input_requests": asked},
    )


def _asking(ctx: ServerRequestContext[Any], result: ChatResult) -> types.InputRequiredResult | None:
    """A run waiting for a person, to a client that asks its user (2026-07-28, with elicitation):
    the `input_required` result that has the client elicit the run's oldest request from its
    user and retry the call with the reply, `request_state` naming the session. None for any
    other client, or when nothing waits."""
    capabilities = ctx.session.client_capabilities
    if (
        ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        or not capabilities
        or not capabilities.elicitation
    ):
        return None
    request = next((r for r in result.input_requests if r.kind != run_pb2.INPUT_KIND_CLIENT_TOOL), None)
    if request is None:
        return None
    if request.kind == run_pb2.INPUT_KIND_QUESTION:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Answer"}},
            "required": ["answer"],
        }
    else:
        schema = {
            "type": "object",
            "properties": {
                "decision": {"type": "string", "title": "Decision", "enum": list(_DECISIONS)},
                "reason": {"type": "string", "title": "Reason"},
            },
            "required": ["decision"],
        }
    elicit = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=result.content, requested_schema=schema)
    )
    return types.InputRequiredResult(input_requests={request.id: elicit}, request_state=result.session_id)


def _reply(responses: types.InputResponses) -> str:
    """The user's reply to the elicited request, as the message that answers it: the answer; an
    approval's decision (and reason). A reply declined or dismissed denies (and tells a question's
    asker so)."""
    reply = next(iter(responses.values()), None)
    if getattr(reply, "action", "") != "accept":
        return "deny: the user declined to reply"
    content = getattr(reply, "content", None) or {}
    if "answer" in content:
        return str(content["answer"])
    decision, reason = str(content.get("decision") or "deny"), str(content.get("reason") or "")
    return f"{decision}: {reason}" if reason else decision


def _failed(error: DomainError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=f"{error.message} ({error.reason})")],
        structured_content={"status": "failed", "reason": error.reason},
        is_error=True,
    )


class _Exchange(Response):
    """The route's answer: the SDK serving the request (its JSON or its event stream)."""

    def __init__(self, tools: AgentTools, call: McpCall) -> None:
        self._tools = tools
        self._call = call
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._tools.serve(self._call, scope, receive, send)


def mcp_router() -> APIRouter:
    router = APIRouter(tags=["MCP"])

    @router.post(MCP_PROJECT_PATH, include_in_schema=False)
    async def project_mcp(project_id: str, request: Request, ctx: Ctx, caller: Auth) -> Response:
        """The project's agents as an MCP server (streamable HTTP)."""
        return _exchange(request, caller, project_id)

    @router.post(MCP_PATH, include_in_schema=False)
    async def scoped_key_mcp(request: Request, ctx: Ctx, caller: Auth) -> Response:
        """The agents of the project the caller's API key is scoped to, as an MCP server."""
        if not caller.project_scope:
            raise InvalidRequest(
                f"{MCP_PATH} serves the project of an API key scoped to one project: name the project "
                f"in the path instead ({MCP_PROJECT_PATH})"
            )
        await ctx.guard.check_target(caller, ProjectTarget(id=caller.project_scope))
        return _exchange(request, caller, caller.project_scope)

    return router


def _exchange(request: Request, caller: Caller, project_id: str) -> Response:
    call = McpCall(caller, project_id, current_budget.get(), admitted_project.get())
    return _Exchange(request.app.state.mcp, call)
