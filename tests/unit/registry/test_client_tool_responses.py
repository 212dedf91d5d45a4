"""A client tool call's response, as the registry's rules take it: the tool's result is the
answer — empty allowed, as a tool's output may be, within the answer's size — and never a
decision or edited arguments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentmesh.registry.runs.input_models import InputDecision, InputKind, InputRequest, InputResponse
from agentmesh.registry.runs.waiting import MAX_ANSWER_BYTES, response_violations

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def request(kind: InputKind) -> InputRequest:
    return InputRequest(
        id="r",
        project_id="p",
        agent_id="a",
        agent="assistant",
        session_id="s",
        run_id="run",
        kind=kind,
        tool="get_weather",
        created_at=NOW,
        expires_at=NOW + timedelta(days=1),
    )


def fields(kind: InputKind, response: InputResponse) -> list[str]:
    return [violation.field for violation in response_violations(request(kind), response)]


def test_a_client_tool_takes_its_result_as_the_answer_even_empty() -> None:
    assert fields(InputKind.CLIENT_TOOL, InputResponse(answer="18C")) == []
    assert fields(InputKind.CLIENT_TOOL, InputResponse(answer="")) == []
    assert fields(InputKind.QUESTION, InputResponse(answer="")) == ["response.answer"]  # unlike a question


def test_a_client_tool_takes_no_decision_nor_arguments_nor_too_long_a_result() -> None:
    assert fields(InputKind.CLIENT_TOOL, InputResponse(decision=InputDecision.APPROVE)) == [
        "response.decision"
    ]
    assert fields(InputKind.CLIENT_TOOL, InputResponse(answer="x", arguments={})) == ["response.arguments"]
    too_long = InputResponse(answer="x" * (MAX_ANSWER_BYTES + 1))
    assert fields(InputKind.CLIENT_TOOL, too_long) == ["response.answer"]
