"""How a person's words at the terminal become a response to what a run asks (`cli/asking.py`):
an approval is approved only by a yes, anything else denies it (with the words as the reason); a
question takes the first answer that is not empty; leaving the prompt gives no response."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentmesh.cli.asking import ANSWER_PROMPT, APPROVE_PROMPT, answer_commands, read_response
from agentmesh.common.v1 import run_pb2

APPROVAL = run_pb2.InputRequest(id="r-1", kind=run_pb2.INPUT_KIND_APPROVAL, tool="delete_file")
QUESTION = run_pb2.InputRequest(id="r-2", kind=run_pb2.INPUT_KIND_QUESTION, question="Which city?")
APPROVE, DENY = run_pb2.INPUT_DECISION_APPROVE, run_pb2.INPUT_DECISION_DENY


def typed(*lines: str | type[BaseException]) -> tuple[Callable[[str], str], list[str]]:
    """A prompt that reads `lines` in turn (an exception type is raised instead); what it asked."""
    asked: list[str] = []
    pending = list(lines)

    def read(prompt: str) -> str:
        asked.append(prompt)
        line = pending.pop(0)
        if isinstance(line, type):
            raise line()
        return line

    return read, asked


@pytest.mark.parametrize(
    ("said", "decision", "reason"),
    [
        ("y", APPROVE, ""),
        (" YES ", APPROVE, ""),
        ("", DENY, ""),
        ("n", DENY, ""),
        ("not on a Friday", DENY, "not on a Friday"),
    ],
)
def test_an_approval_needs_a_yes_and_anything_else_is_a_reason_to_deny(
    said: str, decision: int, reason: str
) -> None:
    read, asked = typed(said)
    response = read_response(APPROVAL, read)
    assert response is not None
    assert (response.decision, response.reason) == (decision, reason)
    assert asked == [APPROVE_PROMPT]


def test_a_question_takes_the_first_answer_that_is_not_empty() -> None:
    read, asked = typed("", "  ", "Lisbon ")
    assert read_response(QUESTION, read) == run_pb2.InputResponse(answer="Lisbon")
    assert asked == [ANSWER_PROMPT] * 3


def test_deny_at_the_answer_prompt_declines_the_question() -> None:
    declined = read_response(QUESTION, typed("Deny: private")[0])
    assert declined == run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_DENY, reason="private")
    assert read_response(QUESTION, typed("Denmark")[0]) == run_pb2.InputResponse(answer="Denmark")


@pytest.mark.parametrize("leaving", [EOFError, KeyboardInterrupt])
def test_leaving_the_prompt_gives_no_response(leaving: type[BaseException]) -> None:
    assert read_response(QUESTION, typed(leaving)[0]) is None
    assert read_response(APPROVAL, typed(leaving)[0]) is None


def test_the_commands_that_answer_name_the_project() -> None:
    assert answer_commands(QUESTION, "demo") == [
        "agentmesh answer r-2 TEXT --project demo",
        "agentmesh deny r-2 --project demo [--reason R]   (decline it)",
    ]
    assert answer_commands(APPROVAL, "my project") == [
        "agentmesh approve r-1 --project 'my project' [--reason R] [--arguments JSON]",
        "agentmesh deny r-1 --project 'my project' [--reason R]",
    ]
