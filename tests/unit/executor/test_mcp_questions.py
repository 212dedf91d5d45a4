"""An MCP server's request for input as the question a run asks, and the answer as the response
the call is sent again with (tools/mcp_questions.py): a one-field form takes the answer as its
field's type, a larger one a JSON object, anything else cancels; one elicitation per round."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
)

from agentmesh.executor.tools.base import ToolAnswer, ToolError
from agentmesh.executor.tools.mcp_questions import question, responses

SEATS = {"type": "object", "properties": {"seats": {"type": "integer", "description": "how many"}}}
GUEST = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}},
    "required": ["name"],
}


def elicit(schema: dict[str, Any], message: str = "Details?") -> InputRequiredResult:
    params = ElicitRequestFormParams(message=message, requested_schema=schema)
    return InputRequiredResult(input_requests={"k1": ElicitRequest(params=params)}, request_state="s1")


def sent(schema: dict[str, Any], text: str) -> Any:
    """The one response an answer is sent as (with the request state echoed)."""
    state = question("kb", "book", elicit(schema)).state
    carried, request_state = responses(ToolAnswer(state, "accept", text))
    assert request_state == "s1" and list(carried) == ["k1"]
    return carried["k1"]


def test_the_question_names_the_server_the_tool_and_the_fields() -> None:
    asked = question("kb", "book", elicit(GUEST, "Who is coming?"))
    assert asked.question == (
        "kb (book) asks: Who is coming?\n- name (string, required)\n- vip (boolean)\n"
        "Answer with a JSON object of these fields."
    )
    assert asked.state == {
        "server": "kb",
        "key": "k1",
        "request_state": "s1",
        "mode": "form",
        "schema": GUEST,
    }


@pytest.mark.parametrize(
    ("schema", "text", "action", "content"),
    [
        (SEATS, " 4 ", "accept", {"seats": 4}),
        (SEATS, "four", "cancel", None),
        (GUEST, '{"name": "Ada", "vip": true}', "accept", {"name": "Ada", "vip": True}),
        (GUEST, "Ada", "cancel", None),
    ],
)
def test_an_answer_fills_the_form_or_cancels(
    schema: dict[str, Any], text: str, action: str, content: dict[str, Any] | None
) -> None:
    response = sent(schema, text)
    assert (response.action, response.content) == (action, content)


def test_an_expired_question_is_cancelled_and_a_url_is_accepted_without_content() -> None:
    state = question("kb", "book", elicit(SEATS)).state
    assert responses(ToolAnswer(state, "cancel"))[0]["k1"].action == "cancel"
    url = ElicitRequestURLParams(message="Sign in", url="https://kb.example/login", elicitation_id="e1")
    visit = InputRequiredResult(input_requests={"k2": ElicitRequest(params=url)})
    asked = question("kb", "book", visit)
    assert "Open https://kb.example/login" in asked.question
    (response,) = responses(ToolAnswer(asked.state, "accept", "done"))[0].values()
    assert (response.action, response.content) == ("accept", None)


def test_several_inputs_at_once_or_sampling_fail_the_call() -> None:
    form = ElicitRequest(params=ElicitRequestFormParams(message="?", requested_schema=SEATS))
    with pytest.raises(ToolError, match="asks for 2 inputs at once"):
        question("kb", "book", InputRequiredResult(input_requests={"a": form, "b": form}))
    sampling = CreateMessageRequest(params=CreateMessageRequestParams(messages=[], max_tokens=10))
    with pytest.raises(ToolError, match="sampling/createMessage, which agentmesh does not offer"):
        question("kb", "book", InputRequiredResult(input_requests={"a": sampling}))
