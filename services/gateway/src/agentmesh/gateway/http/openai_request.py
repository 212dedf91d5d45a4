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
    tools: list[dict[str, Any]] | None = Field(default=None, description="client-side tools: not supported")
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description='"none" or "auto" (no client tools are offered)'
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
        choice = self.tool_choice
        named = isinstance(choice, dict) and choice.get("type") == "function"
        check_tool_choice(
            choice,
            tools=self.tools,
            named=named and isinstance(choice, dict) and isinstance(choice.get("function"), dict),
            named_shape='{"type": "function", "function": {"name": ...}}',
        )
        self.answer_format()
        for index, message in enumerate(self.messages):
            _check_message(message, f"messages[{index}]")

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


def check_tool_choice(
    choice: str | dict[str, Any] | None, *, tools: Any, named: bool, named_shape: str
) -> None:
    """`tool_choice` (and `tools`) as agents honour them: no client tool may be called, so only
    "none" and "auto" pass. "required" and a named function (`named`: the object has the face's
    shape, `named_shape`) are refused as unsupported, anything else as a value OpenAI refuses too;
    `tools` pass only with "none", where no tool may be called anyway."""
    if isinstance(choice, str) and choice not in TOOL_CHOICES:
        raise InvalidParameterValue(
            "tool_choice", f"must be one of {', '.join(TOOL_CHOICES)} or a named function"
        )
    if isinstance(choice, dict) and not named:
        raise InvalidParameterValue("tool_choice", f"an object must be {named_shape}")
    if choice == "required":
        raise UnsupportedParameter("tool_choice", '"required" needs client tools, which are not supported')
    if isinstance(choice, dict):
        raise UnsupportedParameter(
            "tool_choice", "a named function needs client tools, which are not supported"
        )
    if tools and choice != "none":
        raise UnsupportedParameter("tools", "client tools are not supported")


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
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (jsonschema.exceptions.SchemaError, TypeError, AttributeError) as error:
        message = getattr(error, "message", str(error))
        raise InvalidParameterValue(f"{schema_at}.schema", f"is not a JSON schema: {message}") from None
    if outside := _outside_reference(schema):
        raise InvalidParameterValue(
            f"{schema_at}.schema",
            f"refers to {outside!r}: only references within the schema ('#...') are allowed",
        )
    return executor_service_pb2.ResponseFormat(type=kind, name=spec["name"], schema_json=json.dumps(schema))


def _check_message(message: ChatMessage, path: str) -> None:
    if message.role not in MESSAGE_ROLES:
        raise InvalidParameterValue(f"{path}.role", f"must be one of {', '.join(MESSAGE_ROLES)}")
    if message.role == "tool" or (message.model_extra or {}).get("tool_calls"):
        raise UnsupportedParameter(path, "client tool calls are not supported")
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
