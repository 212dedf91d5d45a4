"""A question a person declined (`deny`), as the resumed run reads it: the model is told who
declined and why, and an MCP tool that asked goes on with `decline` — while an expired request
(the registry's denial by `system`) still reads as nobody answering."""

from __future__ import annotations

import json

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.durability.run_log import TOOL, PlannedCall
from agentmesh.executor.loops.asking import (
    QUESTION,
    outcome,
    received_event,
    response_from_event,
    tool_answer,
)
from agentmesh.memory.v1.resources_pb2 import Event

DENY = run_pb2.INPUT_DECISION_DENY
CALL = PlannedCall(TOOL, "call-1", "ask_user", {"question": "Which city?"})
DECLINED = run_pb2.InputResponse(decision=DENY, reason="private", responder="ann@example.com")
EXPIRED = run_pb2.InputResponse(
    decision=DENY, reason="expired: nobody responded within 1 day", responder="system"
)


def test_the_model_is_told_who_declined_and_why() -> None:
    told = outcome(CALL, QUESTION, DECLINED, expired=False)
    assert not told.run and told.output is not None and told.output.is_error
    assert told.output.text == "ask_user: no answer: ann@example.com declined to answer: private"


def test_an_answer_or_an_expiry_is_not_a_decline() -> None:
    answered = outcome(CALL, QUESTION, run_pb2.InputResponse(answer="Lisbon"), expired=False)
    assert answered.output is not None and answered.output.text == "Lisbon"
    for expired in (True, False):  # as handed out (expired), or read back from the log
        late = outcome(CALL, QUESTION, EXPIRED, expired=expired)
        assert late.output is not None and "declined" not in late.output.text


def test_an_mcp_tool_that_asked_goes_on_with_decline_and_an_expiry_with_cancel() -> None:
    asked = Event(content=json.dumps({"tool_state": {"server": "s", "key": "k"}}))
    declined = tool_answer(asked, DECLINED, expired=False)
    assert declined is not None and declined.action == "decline"
    late = tool_answer(asked, EXPIRED, expired=True)
    assert late is not None and late.action == "cancel"


def test_a_recorded_decline_reads_back_as_one() -> None:
    request = run_pb2.InputRequest(
        id="r-1", call_id="call-1", state=run_pb2.INPUT_REQUEST_STATE_ANSWERED, response=DECLINED
    )
    recorded = received_event(request, "asked-1")
    assert recorded.content["decision"] == "deny"
    again = response_from_event(Event(content=json.dumps(recorded.content)))
    assert (
        outcome(CALL, QUESTION, again, expired=False).output
        == outcome(CALL, QUESTION, DECLINED, expired=False).output
    )
