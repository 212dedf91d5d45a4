"""An MCP server's requests for a person's input (elicitation), by protocol revision.

At 2026-07-28 a tool call that needs input answers with an `input_required` result: the
elicitation to show, and an opaque `requestState`; the client asks, then sends the same call again
carrying the response and the state. That fits the mesh's question wait (docs/human-in-the-loop.md):
the call's output is a `ToolQuestion` whose state (the server, the elicitation's key and schema,
the request state) is recorded with the run's request, and the resumed run — on any executor —
calls the tool again with the `ToolAnswer`. One elicitation per round: a server asking for several
at once, or for sampling or roots (which the executor does not offer), has its call fail with why.

At the handshake revisions an elicitation is a request the server sends in the middle of a live
call, which would have to stay open while a person takes an hour to answer: the executor refuses
it with a message that says so (`refuse_live`), and the server decides what its tool does then.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentmesh.executor.tools.base import ToolAnswer, ToolError, ToolQuestion

if TYPE_CHECKING:
    import mcp_types

FORM = "form"
URL = "url"

LIVE_REFUSAL = (
    "agentmesh asks a person for input only through MCP 2026-07-28's input_required results; "
    "it does not hold a tool call open while a person answers"
)
_TRUE = frozenset({"true", "yes", "y", "1", "on"})


def question(server: str, tool: str, result: mcp_types.InputRequiredResult) -> ToolQuestion:
    """The question an `input_required` result asks, with the state its call goes on with."""
    from mcp_types import ElicitRequest

    requests = dict(result.input_requests or {})
    if len(requests) != 1:
        raise ToolError(
            f"MCP server {server!r}: {tool} asks for {len(requests)} inputs at once; "
            "agentmesh asks a person one question at a time"
        )
    ((key, request),) = requests.items()
    if not isinstance(request, ElicitRequest):
        raise ToolError(
            f"MCP server {server!r}: {tool} asks for {request.method}, which agentmesh does not offer"
        )
    params = request.params
    state: dict[str, Any] = {"server": server, "key": key, "request_state": result.request_state}
    if params.mode == URL:
        state["mode"] = URL
        text = f"{params.message}\n\nOpen {params.url}, then answer anything to go on (deny to decline)."
        return ToolQuestion(f"{server} ({tool}) asks: {text}", state)
    schema = json.loads(json.dumps(params.requested_schema, default=_dumped))
    state["mode"], state["schema"] = FORM, schema
    return ToolQuestion(f"{server} ({tool}) asks: {params.message}{_fields_text(schema)}", state)


def responses(answer: ToolAnswer) -> tuple[dict[str, Any], str | None]:
    """The `inputResponses` and `requestState` that carry a person's answer back into the call."""
    from mcp_types import ElicitResult

    state = answer.state
    result = ElicitResult(action=answer.action)
    if answer.action == "accept" and state.get("mode") == FORM:
        content = _content(answer.text, state.get("schema") or {})
        result = (
            ElicitResult(action="accept", content=content)
            if content is not None
            else ElicitResult(action="cancel")
        )
    return {state["key"]: result}, state.get("request_state")


async def refuse_live(context: Any, params: Any) -> mcp_types.ErrorData:
    """The elicitation callback of a handshake-revision connection: refused, saying why."""
    from mcp_types import INVALID_REQUEST, ErrorData

    return ErrorData(code=INVALID_REQUEST, message=LIVE_REFUSAL)


def _dumped(value: Any) -> Any:
    return value.model_dump(by_alias=True, mode="json", exclude_none=True)


def _fields_text(schema: dict[str, Any]) -> str:
    properties: dict[str, Any] = schema.get("properties") or {}
    if not properties:
        return ""
    required = set(schema.get("required") or ())
    lines = []
    for name, field in properties.items():
        kind = (
            "one of " + ", ".join(map(str, field["enum"]))
            if field.get("enum")
            else field.get("type", "string")
        )
        what = field.get("description") or field.get("title") or ""
        lines.append(
            f"- {name} ({kind}{', required' if name in required else ''}){': ' + what if what else ''}"
        )
    how = "Answer with the value." if len(properties) == 1 else "Answer with a JSON object of these fields."
    return "\n" + "\n".join(lines) + "\n" + how


def _content(text: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The form's content from an answer: a JSON object of its fields, or — for a form of one
    field — the answer itself, as that field's type. None when it is neither (the call is then
    cancelled: the server is not sent a form it would refuse)."""
    properties: dict[str, Any] = schema.get("properties") or {}
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    if len(properties) != 1:
        return None
    ((name, field),) = properties.items()
    kind = field.get("type", "string")
    value: Any = text.strip()
    try:
        if kind == "integer":
            value = int(value)
        elif kind == "number":
            value = float(value)
        elif kind == "boolean":
            value = value.lower() in _TRUE
        elif kind == "array":
            value = [item.strip() for item in value.split(",") if item.strip()]
    except ValueError:
        return None
    return {name: value}
