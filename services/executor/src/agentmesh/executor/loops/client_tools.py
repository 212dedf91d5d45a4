"""Tools a client offers beside the agent's own (OpenAI's function tools: RunRequest.client_tools,
docs/openai.md). The model is offered them with the agent's tools; the mesh cannot run them, so a
call of one is asked of the client as a request for input of kind `client_tool` (loops/asking.py):
the run suspends as for an approval, and the client's tool result — the request's answer — is the
call's result when the run resumes, on whichever executor takes it. They are recorded with the
run's input (durability/client_context.py), so a resumed run offers them again.

`client_tool_choice` ("required", or a tool's name) goes to a model that takes OpenAI's
`tool_choice` (every OpenAI-compatible provider) as its own `tool_choice`, on the run's steps until
the model called what it must (`ToolChoice`): past that the run goes on as with
"auto", or it could never answer. A model that does not take it is told, in an instruction after
the agent's own.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from agentmesh.executor.agents.runtime import DELEGATE_TOOL, AgentRuntime
from agentmesh.executor.context.scope import RunFailure
from agentmesh.executor.durability.run_log import PlannedCall
from agentmesh.executor.providers.base import ChatModel, Message, ToolSpec
from agentmesh.executor.providers.factory import message_params
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


def native_choice(request: executor_service_pb2.RunRequest) -> str | dict[str, Any] | None:
    """The client's `tool_choice` as OpenAI's chat completions take it (None: no constraint)."""
    choice = request.client_tool_choice
    if not choice or not request.client_tools:
        return None
    if choice == REQUIRED:
        return REQUIRED
    return {"type": "function", "function": {"name": choice}}


class ToolChoice:
    """A run's models over its steps: `model`, the run's own (its per-message params on the
    agent's), and — while the client's `tool_choice` still binds, on steps that offer tools — the
    same with that `tool_choice`, for a model that takes it natively."""

    def __init__(
        self, request: executor_service_pb2.RunRequest, runtime: AgentRuntime, answered_steps: int
    ) -> None:
        assert runtime.models is not None
        self._request = request
        params = message_params(request.model_settings)

        def for_run(params: dict[str, Any]) -> ChatModel:
            assert runtime.models is not None
            return runtime.models.for_run(
                params, on_fallback=runtime.mark_stale, answered_steps=answered_steps
            )

        self.model = for_run(params)
        choice = native_choice(request) if runtime.native_tool_choice else None
        self._chosen = None if choice is None else for_run({**params, "tool_choice": choice})

    def for_step(self, tools: Sequence[ToolSpec]) -> ChatModel:
        """The model of a step offering `tools` (none: nothing to choose from)."""
        return self._chosen if self._chosen is not None and tools else self.model

    def saw(self, calls: Iterable[PlannedCall]) -> None:
        """A step's calls: once they hold what the client's `tool_choice` says the model must
        call (one of the client's tools for "required", that tool for a name), it binds no more."""
        choice = self._request.client_tool_choice
        wanted = names(self._request) if choice == REQUIRED else {choice}
        if any(call.name in wanted for call in calls):
            self._chosen = None


def instruction(
    request: executor_service_pb2.RunRequest, *, function_calling: bool, native_tool_choice: bool = False
) -> list[Message]:
    """What the model is told of the client's tools: for a model without function calling, what
    they are and how to call them (as its own are described); and, unless its model takes the
    `tool_choice` natively, which one it must call."""
    told: list[str] = []
    if request.client_tools and not function_calling:
        described = "\n".join(
            f"- {spec.name}: {spec.description} Arguments: {json.dumps(spec.parameters)}"
            for spec in specs(request)
        )
        told.append(f"You can also call these tools, in a fenced tool_call block:\n{described}")
    choice = "" if native_tool_choice else request.client_tool_choice
    if choice == REQUIRED:
        listed = ", ".join(tool.name for tool in request.client_tools)
        told.append(f"Before you answer, you must call at least one of these tools: {listed}.")
    elif choice:
        told.append(f"Before you answer, you must call the tool {choice}.")
    return [Message("system", "\n\n".join(told))] if told else []
