"""A person's reply as a chat message (A2A's next message, the OpenAI API's next user message):
what it gives an approval or a question, and the errors naming what a request expects. And an
A2A task read back from a run's log while it waits for input and after it was answered."""

from __future__ import annotations

import json

import pytest
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.a2a.convert import TaskId, task_from_events
from agentmesh.gateway.answers import response_from_data, response_from_text
from agentmesh.gateway.errors import InvalidRequest
from agentmesh.memory.v1 import resources_pb2

APPROVAL = run_pb2.InputRequest(id="r-1", kind=run_pb2.INPUT_KIND_APPROVAL, tool="pay")
QUESTION = run_pb2.InputRequest(id="r-2", kind=run_pb2.INPUT_KIND_QUESTION, question="Where?")
APPROVE, DENY = run_pb2.INPUT_DECISION_APPROVE, run_pb2.INPUT_DECISION_DENY
EventType = resources_pb2.EventType


@pytest.mark.parametrize(
    ("text", "decision", "reason"),
    [
        ("approve", APPROVE, ""),
        ("  Approve. ", APPROVE, ""),
        ("DENY", DENY, ""),
        ("deny: too expensive", DENY, "too expensive"),
        ("Deny - not today", DENY, "not today"),
        ("approve, but only once", APPROVE, "but only once"),
    ],
)
def test_an_approval_takes_approve_or_deny_with_a_reason(text: str, decision: int, reason: str) -> None:
    response = response_from_text(APPROVAL, text, field="message")
    assert (response.decision, response.reason, response.answer) == (decision, reason, "")


@pytest.mark.parametrize("text", ["maybe", "approved", "denying it", "", "yes"])
def test_anything_else_to_an_approval_names_what_is_expected(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        response_from_text(APPROVAL, text, field="messages[0].content")
    assert "messages[0].content" in refused.value.message
    assert "'approve' or 'deny'" in refused.value.message and "r-1" in refused.value.message


def test_a_question_takes_any_text_but_none_and_deny_declines_it() -> None:
    assert response_from_text(QUESTION, " Denmark \n", field="m").answer == "Denmark"
    declined = response_from_text(QUESTION, " Deny: not saying\n", field="m")
    assert (declined.decision, declined.reason, declined.answer) == (DENY, "not saying", "")
    assert response_from_text(QUESTION, "denying it", field="m").answer == "denying it"
    with pytest.raises(InvalidRequest, match="answer it with any text"):
        response_from_text(QUESTION, "  ", field="m")


def test_structured_replies_take_the_fields_rest_takes() -> None:
    response = response_from_data(APPROVAL, {"decision": "Deny", "reason": "no"}, field="d")
    assert (response.decision, response.reason) == (DENY, "no")
    assert response_from_data(QUESTION, {"answer": "Bern"}, field="d").answer == "Bern"
    declined = response_from_data(QUESTION, {"decision": "deny", "reason": "no"}, field="d")
    assert (declined.decision, declined.reason, declined.answer) == (DENY, "no", "")
    for request, data, field in (
        (APPROVAL, {"decision": "maybe"}, "d.decision"),
        (APPROVAL, {"answer": "yes"}, "d.decision"),
        (QUESTION, {"decision": "approve"}, "d.answer"),
        (QUESTION, {"answer": 3}, "d.answer"),
        (QUESTION, {"answer": "x", "colour": "blue"}, "d.colour"),
        (QUESTION, {"decision": "deny", "answer": "x"}, "d.answer"),
    ):
        with pytest.raises(InvalidRequest) as refused:
            response_from_data(request, data, field="d")
        assert [v.field for v in refused.value.violations] == [field], data


def _event(seq: int, kind: int, content: object, **metadata: object) -> resources_pb2.Event:
    event = resources_pb2.Event(
        id=f"e{seq}", seq=seq, run_id="run", session_id="s", agent="ops", event_type=kind
    )
    event.content = content if isinstance(content, str) else json.dumps(content)
    event.metadata.update(metadata)
    return event


def _requested(seq: int, request_id: str) -> resources_pb2.Event:
    content = {
        "request_id": request_id,
        "kind": "approval",
        "tool": "pay",
        "arguments": {"amount": 5},
        "question": "May ops call pay(amount=5)?",
        "expires_at": "2030-01-01T00:00:00Z",
    }
    return _event(seq, EventType.EVENT_TYPE_INPUT_REQUESTED, content, request_id=request_id, last=True)


def test_a_task_whose_run_waits_reads_input_required_then_working_once_answered() -> None:
    events = [_event(1, EventType.EVENT_TYPE_USER_MESSAGE, "pay it"), _requested(2, "r-1")]
    task = task_from_events(TaskId("run", "s"), events).task
    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
    message = task.status.message
    assert message.parts[0].text == "May ops call pay(amount=5)?"
    data = MessageToDict(message.parts[1].data)
    assert data["input_request"]["id"] == "r-1" and data["input_request"]["kind"] == "approval"
    assert data["input_request"]["arguments"] == {"amount": 5}
    assert data["input_request"]["expires_at"] == "2030-01-01T00:00:00Z"

    received = {"request_id": "r-1", "decision": "deny", "reason": "too much", "expired": False}
    answered = [*events, _event(3, EventType.EVENT_TYPE_INPUT_RECEIVED, received, request_id="r-1")]
    task = task_from_events(TaskId("run", "s"), answered).task
    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_WORKING
    assert [m.parts[0].text for m in task.history] == ["pay it", "deny: too much"]
