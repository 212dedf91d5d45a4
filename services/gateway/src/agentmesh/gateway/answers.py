"""A person's response to a request for input, given as a chat message: what the faces that
carry only messages (A2A's next message on an `input-required` task, the OpenAI-compatible API's
next user message in the session) turn into the InputResponse the registry takes. Pure: no I/O.

An approval is answered `approve` or `deny`, in any case, optionally followed by a reason
(`deny: too expensive`); a question by any non-empty text, or declined by `deny` alone (with an
optional reason the same way). Structured clients send the fields REST takes instead:
`{"decision": "approve" | "deny", "reason"?}` or `{"answer": "…"}` (`{"decision": "deny"}`
declines a question). A reply that does not fit its request is refused naming the field and what
the request expects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.errors import InvalidRequest

_DECISIONS = {"approve": run_pb2.INPUT_DECISION_APPROVE, "deny": run_pb2.INPUT_DECISION_DENY}
# "approve", "Deny: too expensive", "deny - not now", "approve." …
_DECISION_TEXT = re.compile(r"^\s*(approve|deny)\b[\s:,;.!-]*(.*?)\s*$", re.IGNORECASE | re.DOTALL)
_REPLY_FIELDS = ("decision", "reason", "answer")
_QUOTED = 60  # how much of a reply that does not fit an error quotes back


def expected(request: run_pb2.InputRequest) -> str:
    """What a request takes, in words (for errors and for the faces' docs)."""
    if request.kind == run_pb2.INPUT_KIND_QUESTION:
        return f"request {request.id} asks a question: answer it with any text, or 'deny' to decline it"
    if request.kind == run_pb2.INPUT_KIND_CLIENT_TOOL:
        return (
            f"request {request.id} waits for the result of the client's tool call {request.tool}: give"
            f" it as a `tool` message whose tool_call_id is {request.id} (or as an answer)"
        )
    return (
        f"request {request.id} asks for an approval: reply 'approve' or 'deny', optionally followed"
        " by a reason ('deny: too expensive')"
    )


def response_from_text(request: run_pb2.InputRequest, text: str, *, field: str) -> run_pb2.InputResponse:
    """The response a text reply gives `request`; `field` is where the face carried it. A client
    tool call is answered by its result, which a chat message does not carry."""
    if request.kind == run_pb2.INPUT_KIND_CLIENT_TOOL:
        raise InvalidRequest.field(field, expected(request))
    if request.kind == run_pb2.INPUT_KIND_QUESTION:
        if not text.strip():
            raise InvalidRequest.field(field, expected(request))
        declining = _DECISION_TEXT.match(text)
        if declining is not None and declining.group(1).lower() == "deny":
            return run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_DENY, reason=declining.group(2))
        return run_pb2.InputResponse(answer=text.strip())
    match = _DECISION_TEXT.match(text)
    if match is None:
        quoted = text.strip()[:_QUOTED]
        raise InvalidRequest.field(field, f"{expected(request)}, not {quoted!r}")
    decision, reason = match.group(1).lower(), match.group(2)
    return run_pb2.InputResponse(decision=_DECISIONS[decision], reason=reason)


def response_from_data(
    request: run_pb2.InputRequest, data: Mapping[str, Any], *, field: str
) -> run_pb2.InputResponse:
    """The response a structured reply gives `request`: `{"decision", "reason"?}` for an
    approval, `{"answer"}` for a question (as REST takes them)."""
    unknown = sorted(set(data) - set(_REPLY_FIELDS))
    if unknown:
        raise InvalidRequest.field(
            f"{field}.{unknown[0]}", f"is not a reply field; a reply has {', '.join(_REPLY_FIELDS)}"
        )
    for name in _REPLY_FIELDS:
        if name in data and not isinstance(data[name], str):
            raise InvalidRequest.field(f"{field}.{name}", "must be a string")
    if request.kind == run_pb2.INPUT_KIND_CLIENT_TOOL:
        if "decision" in data or "answer" not in data:
            raise InvalidRequest.field(f"{field}.answer", expected(request))
        return run_pb2.InputResponse(answer=str(data["answer"]))
    if request.kind == run_pb2.INPUT_KIND_QUESTION:
        if str(data.get("decision", "")).lower() == "deny" and "answer" not in data:
            return run_pb2.InputResponse(
                decision=run_pb2.INPUT_DECISION_DENY, reason=str(data.get("reason", ""))
            )
        if "decision" in data or not str(data.get("answer", "")).strip():
            raise InvalidRequest.field(f"{field}.answer", expected(request))
        return run_pb2.InputResponse(answer=str(data["answer"]).strip())
    decision = str(data.get("decision", "")).lower()
    if "answer" in data or decision not in _DECISIONS:
        raise InvalidRequest.field(
            f"{field}.decision", f"request {request.id} asks for an approval: 'approve' or 'deny'"
        )
    return run_pb2.InputResponse(decision=_DECISIONS[decision], reason=str(data.get("reason", "")))
