"""OpenAI's chat completion request as the mesh reads it: the fields agents honour, and the
refusal (400, `invalid_request_error`, `param` naming the field) of what they cannot honour.

OpenAI's request objects grow all the time, so unknown fields are accepted; but a field that
changes what the answer is (`n`, `logprobs`, `stop`, an image part) and that the mesh cannot
honour is refused, never dropped with a 200. Fields that only tune or label a request (`seed`,
`top_p`, the penalties, `user`, `metadata`, `store`, `service_tier`, `parallel_tool_calls`) are
accepted and have no effect: an agent's answer does not depend on them in a way a client can
rely on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.errors import InvalidParameterValue, InvalidRequest, UnsupportedParameter
from agentmesh.gateway.gateway import check_model_settings
from agentmesh.gateway.http.schemas import check_storable
from agentmesh.internal.executor.v1 import executor_service_pb2

SESSION_HEADER = "X-Session-Id"

# Roles a chat message may have (`developer` is the newer name of `system`).
MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool")
TOOL_CHOICES = ("none", "auto", "required")
# OpenAI's rule for a function's name.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NO_ARGUMENTS = {"type": "object", "properties": {}}
# Request fields that change the answer and that no agent can honour, with why.
_UNHONOURED: dict[str, str] = {
    "logprobs": "token log probabilities are not available from an agent",
    "top_logprobs": "token log probabilities are not available from an agent",
    "logit_bias": "is not supported: an agent's model settings are its own",
    "stop": "stop sequences are not supported",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported; give the agent a tool instead",
    "functions": "the legacy `functions` field is not supported; use `tools`",
    "function_call": "the legacy `function_call` field is not supported; use `tool_choice`",
}


class OpenAIObject(BaseModel):
    """An OpenAI request object. OpenAI's request objects grow all the time: what is new is
    accepted, then judged (`check_unhonoured`)."""

    model_config = ConfigDict(extra="allow")


class ContentPart(OpenAIObject):
    type: str
    text: str | None = None


class ChatMessage(OpenAIObject):
    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(OpenAIObject):
    include_usage: bool | None = False


class ChatCompletionRequest(OpenAIObject):
    model: str = Field(default="", description='"project_slug/agent_name"; ignored on per-agent routes')
    messages: list[ChatMessage] = Field(min_length=1, description="the last user message is the input")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    session_id: str | None = Field(
        default=None, description=f"session to continue (or header {SESSION_HEADER})"
    )
    n: int | None = Field(default=None, description="1 only: an agent gives one answer")
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="function tools the client runs: offered to the agent's model beside its own",
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description='"none", "auto", "required" or {"type": "function", "function": {"name"}}'
    )
    response_format: dict[str, Any] | None = Field(
        default=None,
        description='{"type": "text" | "json_object"} or {"type": "json_schema", "json_schema": {...}}',
    )
    modalities: list[str] | None = Field(default=None, description='["text"] only')
    # Per-message model settings: they apply to this chat's run without rebuilding the agent.
    temperature: float | None = Field(default=None, description="0 to 2, for this message only")
    max_tokens: int | None = Field(default=None, description="at least 1, for this message only")
    max_completion_tokens: int | None = Field(default=None, description="as max_tokens")
    reasoning_effort: str | None = Field(
        default=None, description="none, minimal, low, medium or high, for this message only"
    )
    double_texting: str | None = Field(
        default=None,
        description="when the session's previous message is still running: reject (409), enqueue "
        "(run after it) or interrupt (cancel it, then run); default: the agent's policy",
    )

    def model_settings(self) -> run_pb2.ModelSettings | None:
        """The request's per-message model settings (None when it sets none)."""
        field, max_tokens = (
            ("max_completion_tokens", self.max_completion_tokens)
            if self.max_completion_tokens is not None
            else ("max_tokens", self.max_tokens)
        )
        return per_message_settings(
            temperature=self.temperature,
            max_tokens=max_tokens,
            max_tokens_field=field,
            reasoning_effort=self.reasoning_effort,
        )

    def check_honoured(self) -> None:
        """Raises UnsupportedParameter (or InvalidParameterValue, for a value OpenAI itself
        refuses) naming the first field whose meaning the mesh cannot honour."""
        if self.n is not None and self.n != 1:
            if self.n < 1:
                raise InvalidParameterValue("n", "must be at least 1")
            raise UnsupportedParameter("n", "must be 1: an agent gives one answer")
        check_unhonoured(self.model_extra or {}, _UNHONOURED)
        if self.modalities is not None and any(kind != "text" for kind in self.modalities):
            raise UnsupportedParameter("modalities", 'only ["text"] is supported')
        self.client_tools()
        self.answer_format()
        for index, message in enumerate(self.messages):
            _check_message(message, f"messages[{index}]")

    def client_tools(self) -> ClientTools:
        """The function tools offered to the agent's model, and which one it must call."""
        functions = []
        for index, tool in enumerate(self.tools or []):
            if tool.get("type") != "function":
                raise UnsupportedParameter(f"tools[{index}].type", "only function tools are supported")
            functions.append((f"tools[{index}].function", tool.get("function")))
        choice = self.tool_choice
        named = (
            choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
        )
        return client_tools(
            functions,
            choice,
            named=named.get("name") if isinstance(named, dict) else None,
            named_shape='{"type": "function", "function": {"name": ...}}',
        )

    def tool_results(self) -> list[ToolResult]:
        """The client's results of tool calls (the `tool` messages that end the request): a
        follow-up that answers the calls its previous completion returned (none: a new message)."""
        results: list[ToolResult] = []
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.role != "tool":
                break
            call_id = (message.model_extra or {}).get("tool_call_id")
            results.insert(
                0, ToolResult(str(call_id), message_text(message), f"messages[{index}].tool_call_id")
            )
        return results

    def answer_format(self) -> executor_service_pb2.ResponseFormat | None:
        """The shape the answer must have (None for text): see `answer_format`."""
        response_format = self.response_format or {}
        return answer_format(
            response_format.get("type", "text"),
            response_format.get("json_schema"),
            at="response_format",
            schema_at="response_format.json_schema",
        )

    @model_validator(mode="after")
    def _storable(self) -> ChatCompletionRequest:
        check_storable(self.model, "model")
        if self.session_id:
            check_storable(self.session_id, "session_id")
        for index, message in enumerate(self.messages):
            check_storable(message_text(message), f"messages[{index}].content")
        return self


def check_unhonoured(fields: dict[str, Any], unhonoured: dict[str, str]) -> None:
    """Raises UnsupportedParameter for the first of `unhonoured` (a field and why the mesh cannot
    honour it) that `fields` sets to something other than nothing."""
    for name, why in unhonoured.items():
        if fields.get(name) not in (None, False, [], {}, ""):
            raise UnsupportedParameter(name, why)


@dataclass(frozen=True)
class ClientTools:
    """The function tools a client offers the agent's model (RunRequest.client_tools), each with
    where the request holds it (`paths`), and which one the model must call (`choice`: "",
    "required" or a tool's name)."""

    tools: list[executor_service_pb2.ClientTool] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    choice: str = ""


@dataclass(frozen=True)
class ToolResult:
    """A client's result of a tool call the mesh returned: the call's id (its request for
    input's), the tool's output, and where the request holds the id (for errors)."""

    call_id: str
    output: str
    field: str


def client_tools(
    functions: Sequence[tuple[str, Any]], choice: Any, *, named: str | None, named_shape: str
) -> ClientTools:
    """`tools` and `tool_choice` as agents honour them. `functions`: each tool's function object
    (`name`, `description`, `parameters`) with where the request holds it; `named`: the name a
    `tool_choice` object of the face's shape (`named_shape`) gives, None when it is not one.
    Refused as OpenAI refuses them: an unknown choice, a choice that names no tool or needs tools
    none are given for, a name OpenAI does not take or two tools of one name, parameters that
    are not a JSON schema. With "none" no tool is offered."""
    if isinstance(choice, str) and choice not in TOOL_CHOICES:
        raise InvalidParameterValue(
            "tool_choice", f"must be one of {', '.join(TOOL_CHOICES)} or a named function"
        )
    if isinstance(choice, dict) and named is None:
        raise InvalidParameterValue("tool_choice", f"an object must be {named_shape}")
    offered = ClientTools()
    for path, function in functions:
        if not isinstance(function, dict):
            raise InvalidParameterValue(path, "must be an object with a name")
        name, description = function.get("name"), function.get("description") or ""
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise InvalidParameterValue(f"{path}.name", "must be 1 to 64 letters, digits, '_' or '-'")
        if any(tool.name == name for tool in offered.tools):
            raise InvalidParameterValue(f"{path}.name", f"{name!r} names two tools")
        if not isinstance(description, str):
            raise InvalidParameterValue(f"{path}.description", "must be a string")
        parameters = function.get("parameters") or _NO_ARGUMENTS
        check_schema(parameters, f"{path}.parameters")
        offered.tools.append(
            executor_service_pb2.ClientTool(
                name=name, description=description, parameters_json=json.dumps(parameters)
            )
        )
        offered.paths.append(path)
    if (choice == "required" or named is not None) and not offered.tools:
        raise InvalidParameterValue("tool_choice", "is only allowed when tools are specified")
    if named is not None and all(tool.name != named for tool in offered.tools):
        raise InvalidParameterValue("tool_choice", f"names {named!r}, which is not one of tools")
    if choice == "none":
        return ClientTools()  # no tool may be called: none is offered
    return ClientTools(offered.tools, offered.paths, "required" if choice == "required" else named or "")


def per_message_settings(
    *, temperature: float | None, max_tokens: int | None, max_tokens_field: str, reasoning_effort: str | None
) -> run_pb2.ModelSettings | None:
    """A request's per-message model settings, checked (None when it sets none): they apply to
    the chat's run only, without rebuilding the agent."""
    settings = run_pb2.ModelSettings(reasoning_effort=reasoning_effort or "")
    if temperature is not None:
        settings.temperature = temperature
    if max_tokens is not None:
        if not 1 <= max_tokens <= 2**31 - 1:
            raise InvalidRequest.field(max_tokens_field, f"must be between 1 and {2**31 - 1}")
        settings.max_tokens = max_tokens
    check_model_settings(settings, prefix="")
    return settings if settings.ListFields() else None


def answer_format(
    kind: Any, spec: Any, *, at: str, schema_at: str
) -> executor_service_pb2.ResponseFormat | None:
    """The shape an answer must have (None for text): the model is told, and an answer of another
    shape fails the run. `kind` is the format's type, `spec` the object holding `name` and
    `schema` for json_schema; `at` and `schema_at` are where the face's request holds them, for
    the error's `param`."""
    if kind == "text":
        return None
    if kind == "json_object":
        return executor_service_pb2.ResponseFormat(type=kind)
    if kind != "json_schema":
        raise InvalidParameterValue(f"{at}.type", "must be text, json_object or json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise InvalidParameterValue(f"{schema_at}.name", "is required")
    schema = spec.get("schema", {})
    check_schema(schema, f"{schema_at}.schema")
    return executor_service_pb2.ResponseFormat(type=kind, name=spec["name"], schema_json=json.dumps(schema))


def check_schema(schema: Any, at: str) -> None:
    """A client's JSON schema (an answer's format, a tool's parameters) is one, and refers to
    nothing outside itself, which the executor would have to fetch from an address the client
    chose."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (jsonschema.exceptions.SchemaError, TypeError, AttributeError) as error:
        message = getattr(error, "message", str(error))
        raise InvalidParameterValue(at, f"is not a JSON schema: {message}") from None
    if outside := _outside_reference(schema):
        raise InvalidParameterValue(
            at, f"refers to {outside!r}: only references within the schema ('#...') are allowed"
        )


def _check_message(message: ChatMessage, path: str) -> None:
    if message.role not in MESSAGE_ROLES:
        raise InvalidParameterValue(f"{path}.role", f"must be one of {', '.join(MESSAGE_ROLES)}")
    if message.role == "tool" and not isinstance((message.model_extra or {}).get("tool_call_id"), str):
        raise InvalidParameterValue(f"{path}.tool_call_id", "is required in a tool message")
    if isinstance(message.content, list):
        for index, part in enumerate(message.content):
            if part.type not in ("text", "refusal"):
                raise UnsupportedParameter(
                    f"{path}.content[{index}].type", f'"{part.type}" parts are not supported: text only'
                )


def _outside_reference(schema: Any) -> str:
    """The first `$ref` (or `$dynamicRef`) of a schema that points outside it, else "": the
    executor would have to fetch it, from an address the client chose."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
                return value
            if found := _outside_reference(value):
                return found
    elif isinstance(schema, list):
        for item in schema:
            if found := _outside_reference(item):
                return found
    return ""


def message_text(message: ChatMessage) -> str:
    """A message's text: its content, or its text parts joined."""
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    return "".join(part.text or "" for part in message.content if part.type == "text")
