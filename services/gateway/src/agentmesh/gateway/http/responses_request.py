"""OpenAI's Responses API request (`POST /v1/responses`) as the mesh reads it: the same rules as a
chat completion request (openai_request.py) — what agents honour, what only tunes or labels a
request and is accepted without effect, and the refusal (400, `invalid_request_error`, `param`
naming the field) of what they cannot honour — spelt as the Responses API spells its fields.

A response's id names where it ran: `resp_<run_id>_<session_id>` (`ResponseId`). A request whose
`previous_response_id` is such an id continues that session, as a chat completion with that
session's id does: on any gateway, with no table of responses to keep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.errors import InvalidParameterValue, PreviousResponseNotFound, UnsupportedParameter
from agentmesh.gateway.gateway import REASONING_EFFORTS, AgentGateway
from agentmesh.gateway.http.openai_request import (
    MESSAGE_ROLES,
    ChatMessage,
    ClientTools,
    OpenAIObject,
    ToolResult,
    answer_format,
    check_unhonoured,
    client_tools,
    per_message_settings,
)
from agentmesh.gateway.http.schemas import check_storable
from agentmesh.internal.executor.v1 import executor_service_pb2

# Request fields that change the answer and that no agent can honour, with why.
_UNHONOURED: dict[str, str] = {
    "include": "no extra output data is available from an agent",
    "background": "background responses are not supported: stream, or wait for the answer",
    "conversation": "conversations are not supported; continue a response with previous_response_id",
    "prompt": "prompt templates are not supported",
    "top_logprobs": "token log probabilities are not available from an agent",
    "max_tool_calls": "a limit on tool calls is not supported",
}
# Text parts of an input message: a person's, or an earlier answer a client that keeps no
# conversation on the server sends back.
_TEXT_PARTS = ("input_text", "output_text", "refusal")
_CALL, _CALL_OUTPUT = "function_call", "function_call_output"
_ID_PREFIX = "resp_"
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class ResponseId:
    """A response's id, `resp_<run_id>_<session_id>`: the run that answered and the session it
    ran in, so that `previous_response_id` leads to the session on any gateway."""

    run_id: str
    session_id: str

    def __str__(self) -> str:
        return f"{_ID_PREFIX}{self.run_id}_{self.session_id}"

    @classmethod
    def parse(cls, value: str) -> ResponseId:
        """The id `previous_response_id` names; PreviousResponseNotFound when it is none."""
        found = cls.of(value)
        if found is None:
            raise PreviousResponseNotFound(value)
        return found

    @classmethod
    def of(cls, value: str) -> ResponseId | None:
        """The response id `value` is, or None when it has not a response id's shape."""
        run_id, _, session_id = value.removeprefix(_ID_PREFIX).partition("_")
        if (
            not value.startswith(_ID_PREFIX)
            or not _RUN_ID.match(run_id)
            or not AgentGateway.is_session_id(session_id)
        ):
            return None
        return cls(run_id, session_id)


class InputPart(OpenAIObject):
    type: str
    text: str | None = None


class InputItem(OpenAIObject):
    type: str | None = Field(default=None, description='"message" (the default) only')
    role: str | None = None
    content: str | list[InputPart] | None = None


class Reasoning(OpenAIObject):
    effort: str | None = Field(default=None, description="none, minimal, low, medium or high")
    summary: str | None = Field(default=None, description="not supported")
    generate_summary: str | None = Field(default=None, description="not supported")


class TextOptions(OpenAIObject):
    format: dict[str, Any] | None = Field(
        default=None,
        description='{"type": "text" | "json_object"} or {"type": "json_schema", "name", "schema"}',
    )


class ResponseRequest(OpenAIObject):
    model: str = Field(default="", description='"project_slug/agent_name"; ignored on per-agent routes')
    input: str | list[InputItem] = Field(
        description="the input: text, or messages whose last user message is the input"
    )
    instructions: str | None = Field(
        default=None, description="a system message before the input (in a new session)"
    )
    stream: bool | None = False
    previous_response_id: str | None = Field(
        default=None, description="continue the session of this response"
    )
    max_output_tokens: int | None = Field(default=None, description="at least 1, for this message only")
    temperature: float | None = Field(default=None, description="0 to 2, for this message only")
    reasoning: Reasoning | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="function tools the client runs, offered beside the agent's own"
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description='"none", "auto", "required" or {"type": "function", "name"}'
    )
    text: TextOptions | None = None
    double_texting: str | None = Field(
        default=None,
        description="when the session's previous message is still running: reject (409), enqueue "
        "(run after it) or interrupt (cancel it, then run); default: the agent's policy",
    )

    def check_honoured(self) -> None:
        """Raises UnsupportedParameter (or InvalidParameterValue, for a value OpenAI itself
        refuses) naming the first field whose meaning the mesh cannot honour."""
        check_unhonoured(self.model_extra or {}, _UNHONOURED)
        if self.reasoning is not None:
            if self.reasoning.summary or self.reasoning.generate_summary:
                field = "reasoning.summary" if self.reasoning.summary else "reasoning.generate_summary"
                raise UnsupportedParameter(field, "reasoning summaries are not available from an agent")
            if self.reasoning.effort and self.reasoning.effort not in REASONING_EFFORTS:
                raise InvalidParameterValue(
                    "reasoning.effort", f"must be one of {', '.join(REASONING_EFFORTS)}"
                )
        self.client_tools()
        self.answer_format()
        self.messages()

    def messages(self) -> tuple[list[ChatMessage], list[str]]:
        """The request as chat messages — `instructions` as the system message first, then the
        input's messages — with where each one's text is in the request."""
        messages: list[ChatMessage] = []
        fields: list[str] = []
        if self.instructions:
            messages.append(ChatMessage(role="system", content=self.instructions))
            fields.append("instructions")
        if isinstance(self.input, str):
            return [*messages, ChatMessage(role="user", content=self.input)], [*fields, "input"]
        for index, item in enumerate(self.input):
            messages.append(_message(item, f"input[{index}]"))
            fields.append(f"input[{index}].content")
        return messages, fields

    def client_tools(self) -> ClientTools:
        """The function tools offered to the agent's model, and which one it must call."""
        functions = []
        for index, tool in enumerate(self.tools or []):
            if tool.get("type") != "function":
                raise UnsupportedParameter(f"tools[{index}].type", "only function tools are supported")
            functions.append((f"tools[{index}]", tool))
        choice = self.tool_choice
        named = choice.get("name") if isinstance(choice, dict) and choice.get("type") == "function" else None
        return client_tools(
            functions,
            choice,
            named=named if isinstance(named, str) else None,
            named_shape='{"type": "function", "name": ...}',
        )

    def tool_results(self) -> list[ToolResult]:
        """The client's results of function calls (the `function_call_output` items that end the
        input): a follow-up that answers the calls its previous response returned."""
        results: list[ToolResult] = []
        items = [] if isinstance(self.input, str) else self.input
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if item.type != _CALL_OUTPUT:
                break
            extra = item.model_extra or {}
            results.insert(
                0,
                ToolResult(
                    str(extra.get("call_id")), _output(extra.get("output")), f"input[{index}].call_id"
                ),
            )
        return results

    def model_settings(self) -> run_pb2.ModelSettings | None:
        """The request's per-message model settings (None when it sets none)."""
        return per_message_settings(
            temperature=self.temperature,
            max_tokens=self.max_output_tokens,
            max_tokens_field="max_output_tokens",
            reasoning_effort=self.reasoning.effort if self.reasoning else None,
        )

    def answer_format(self) -> executor_service_pb2.ResponseFormat | None:
        """The shape the answer must have (None for text), from `text.format`."""
        spec = (self.text.format if self.text else None) or {}
        return answer_format(spec.get("type", "text"), spec, at="text.format", schema_at="text.format")

    def previous(self) -> ResponseId | None:
        """The response this one continues, if any."""
        return ResponseId.parse(self.previous_response_id) if self.previous_response_id else None

    @model_validator(mode="after")
    def _storable(self) -> ResponseRequest:
        check_storable(self.model, "model")
        check_storable(self.instructions or "", "instructions")
        check_storable(self.previous_response_id or "", "previous_response_id")
        if isinstance(self.input, str):
            check_storable(self.input, "input")
            return self
        for index, item in enumerate(self.input):
            check_storable(_text(item), f"input[{index}].content")
            check_storable(_output((item.model_extra or {}).get("output")), f"input[{index}].output")
        return self


def _message(item: InputItem, path: str) -> ChatMessage:
    """An input item as a chat message: a message of text only; a function call and its output
    (of the earlier turns a client sends back) as the assistant's call and the tool's result."""
    extra = item.model_extra or {}
    if item.type in (_CALL, _CALL_OUTPUT) and not isinstance(extra.get("call_id"), str):
        raise InvalidParameterValue(f"{path}.call_id", f"is required in a {item.type} item")
    if item.type == _CALL:
        return ChatMessage(role="assistant", content="")
    if item.type == _CALL_OUTPUT:
        return ChatMessage(role="tool", content=_output(extra.get("output")), tool_call_id=extra["call_id"])
    if item.type not in (None, "message"):
        raise UnsupportedParameter(
            f"{path}.type", f'"{item.type}" items are not supported: messages and function calls only'
        )
    if item.role is None or item.role not in MESSAGE_ROLES or item.role == "tool":
        roles = ", ".join(role for role in MESSAGE_ROLES if role != "tool")
        raise InvalidParameterValue(f"{path}.role", f"must be one of {roles}")
    if isinstance(item.content, list):
        for index, part in enumerate(item.content):
            if part.type not in _TEXT_PARTS:
                raise UnsupportedParameter(
                    f"{path}.content[{index}].type", f'"{part.type}" parts are not supported: text only'
                )
    return ChatMessage(role=item.role, content=_text(item))


def _text(item: InputItem) -> str:
    if item.content is None or isinstance(item.content, str):
        return item.content or ""
    return "".join(part.text or "" for part in item.content if part.type in _TEXT_PARTS)


def _output(output: Any) -> str:
    """A function call's output: text, or its text parts joined."""
    if isinstance(output, list):
        return "".join(str(part.get("text") or "") for part in output if isinstance(part, dict))
    return "" if output is None else str(output)
