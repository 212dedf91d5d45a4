"""Client-side tools on the OpenAI-compatible faces (docs/openai.md, "Client-side tools"): the
function tools a request offers go to the agent's model beside its own; a call of one suspends
the run with a request for input of kind `client_tool` (the human-in-the-loop machinery), which a
completion returns as a tool call whose id is the request's id; the client's follow-up carrying
the tool's result answers the request and resumes that run — on any gateway, since the id leads
to it through the registry.

This module holds what the chat completion and Responses faces share of it: the check that no
offered tool shares a name with the agent's own, the follow-up that resumes the run, and the
calls a suspended run asks of its client.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fastapi import Request

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import ChatStream
from agentmesh.gateway.errors import InvalidParameterValue, ModelNotFound, UnsupportedParameter
from agentmesh.gateway.http.agents import resolve_agent
from agentmesh.gateway.http.context import HttpContext, until_disconnected
from agentmesh.gateway.http.openai_request import ClientTools, ToolResult
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import NotFound
from agentmesh.runtime.protos import struct_to_dict

# The tool an agent that may delegate is offered to delegate with (executor agents/runtime.py).
DELEGATE_TOOL = "delegate"


async def check_tool_names(ctx: HttpContext, caller: Caller, ref: AgentRef, offered: ClientTools) -> None:
    """Refuses (400, naming the tool) a client tool that shares its name with one of the agent's
    tools, or with `delegate`: the model could not tell which one it calls. (An MCP server's
    tools are known only once an executor builds the agent: it refuses such a clash itself.) A
    workflow agent has no model of its own to offer them to: its client tools are refused."""
    if not offered.tools:
        return
    try:
        spec = await resolve_agent(ctx, caller, ref.project_slug, ref.agent_name)
    except NotFound:
        raise ModelNotFound(str(ref)) from None
    if spec.kind not in (resources_pb2.AGENT_KIND_UNSPECIFIED, resources_pb2.AGENT_KIND_LLM):
        raise UnsupportedParameter(
            "tools", f"{ref} is a workflow agent: its sub-agents call tools, it has no model to offer them to"
        )
    own = {*spec.tools, DELEGATE_TOOL}
    for tool, path in zip(offered.tools, offered.paths, strict=True):
        if tool.name in own:
            raise InvalidParameterValue(
                f"{path}.name", f"the agent has a tool named {tool.name!r} already: rename the client's"
            )


async def answer_tool_results(
    request: Request,
    ctx: HttpContext,
    caller: Caller,
    ref: AgentRef,
    results: Sequence[ToolResult],
    session_id: str | None,
) -> ChatStream:
    """The chat a follow-up with the client's tool results is: the run those calls suspended,
    resumed with them (AgentGateway.answer_tool_calls)."""
    answers = [(result.call_id, result.output, result.field) for result in results]
    try:
        return await until_disconnected(
            request, ctx.gateway.answer_tool_calls(caller, ref, session_id or "", answers)
        )
    except NotFound as error:
        raise ModelNotFound(str(ref)) from error


def client_calls(requests: Sequence[run_pb2.InputRequest]) -> list[run_pb2.InputRequest]:
    """Of what a suspended run waits for, the calls of the client's tools."""
    return [request for request in requests if request.kind == run_pb2.INPUT_KIND_CLIENT_TOOL]


def arguments_json(request: run_pb2.InputRequest) -> str:
    """A client tool call's arguments as OpenAI sends them: a JSON object, as text."""
    return json.dumps(struct_to_dict(request.arguments))


def tool_call(request: run_pb2.InputRequest, index: int | None = None) -> dict[str, object]:
    """A client tool call as a chat completion's `tool_calls` item (a chunk's, with its `index`)."""
    call: dict[str, object] = {
        "id": request.id,
        "type": "function",
        "function": {"name": request.tool, "arguments": arguments_json(request)},
    }
    return call if index is None else {"index": index, **call}
