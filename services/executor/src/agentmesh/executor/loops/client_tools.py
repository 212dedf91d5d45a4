"""Tools a client offers beside the agent's own (OpenAI's function tools: RunRequest.client_tools,
docs/openai.md). The model is offered them with the agent's tools; the mesh cannot run them, so a
call of one is asked of the client as a request for input of kind `client_tool` (loops/asking.py):
the run suspends as for an approval, and the client's tool result — the request's answer — is the
call's result when the run resumes, on whichever executor takes it. They are recorded with the
run's input (durability/client_context.py), so a resumed run offers them again.

`client_tool_choice` ("required", or a tool's name) is told to the model as an instruction after
the agent's own, which every provider takes.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from agentmesh.executor.agents.runtime import DELEGATE_TOOL
from agentmesh.executor.context.scope import RunFailure
from agentmesh.executor.providers.base import Message, ToolSpec
from agentmesh.internal.executor.v1 import executor_service_pb2

# A call's permission (PlannedCall.permission) when the client runs it: no rule of the agent's
# applies, the client sees and answers every call.
CLIENT = "client"
REQUIRED = "required"
CLIENT_TOOL_CLASH = "CLIENT_TOOL_CLASH"
_ANY_OBJECT = {"type": "object"}


def names(request: executor_service_pb2.RunRequest) -> frozenset[str]:
    return frozenset(tool.name for tool in request.client_tools)


def specs(request: executor_service_pb2.RunRequest) -> list[ToolSpec]:
    """The client's tools as the model is offered them."""
    return [
        ToolSpec(
            name=tool.name,
            description=tool.description,
            parameters=json.loads(tool.parameters_json) if tool.parameters_json else _ANY_OBJECT,
        )
        for tool in request.client_tools
    ]


def check(request: executor_service_pb2.RunRequest, own_tools: Collection[str]) -> None:
    """A client's tool may not share its name with one of the agent's or with `delegate` (an MCP
    server's tool is known only once the agent is built here): the model could not tell which it
    calls."""
    for index, tool in enumerate(request.client_tools):
        if tool.name in own_tools or tool.name == DELEGATE_TOOL:
            raise RunFailure(
                "INVALID_ARGUMENT",
                f"tools[{index}].function.name: the agent has a tool named {tool.name!r} already",
                reason=CLIENT_TOOL_CLASH,
            )


def instruction(request: executor_service_pb2.RunRequest, *, function_calling: bool) -> list[Message]:
    """What the model is told of the client's tools: for a model without function calling, what
    they are and how to call them (as its own are described); and which one it must call."""
    told: list[str] = []
    if request.client_tools and not function_calling:
        described = "\n".join(
            f"- {spec.name}: {spec.description} Arguments: {json.dumps(spec.parameters)}"
            for spec in specs(request)
        )
        told.append(f"You can also call these tools, in a fenced tool_call block:\n{described}")
    choice = request.client_tool_choice
    if choice == REQUIRED:
        listed = ", ".join(tool.name for tool in request.client_tools)
        told.append(f"Before you answer, you must call at least one of these tools: {listed}.")
    elif choice:
        told.append(f"Before you answer, you must call the tool {choice}.")
    return [Message("system", "\n\n".join(told))] if told else []
