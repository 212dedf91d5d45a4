"""What an OpenAI client sees of a run: the addressed agent's answer only, no step markers."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import AnswerStream


def step(run: str = "top") -> run_pb2.RunEvent:
    return run_pb2.RunEvent(run_id=run, step_started=run_pb2.StepStarted(step=1))


def text(value: str, run: str = "top", path: tuple[str, ...] = ()) -> run_pb2.RunEvent:
    return run_pb2.RunEvent(run_id=run, delegation_path=path, text_delta=run_pb2.TextDelta(text=value))


def feed(stream: AnswerStream, events: list[run_pb2.RunEvent]) -> str:
    return "".join(stream.feed(event) for event in events)


def test_streams_the_addressed_runs_text_only() -> None:
    stream = AnswerStream()
    started = run_pb2.RunEvent(run_id="top", run_started=run_pb2.RunStarted(agent_kind="llm"))
    sent = feed(
        stream, [started, step(), text("Hello "), text("worker text", "sub", ("top",)), text("world")]
    )
    assert sent == "Hello world"
    assert stream.finish("Hello world") == []


def test_fenced_delegation_and_tool_blocks_are_dropped_even_across_chunks() -> None:
    stream = AnswerStream()
    chunks = ["Let me ask. `", '``delegate\n{"agent": "w", ', '"task": "t"}\n`', "``", " Done."]
    sent = feed(stream, [step(), *(text(chunk) for chunk in chunks)])
    assert sent == "Let me ask.  Done."
    other = AnswerStream()
    assert feed(other, [text("```python\nprint(1)\n```")]) == "```python\nprint(1)\n```"


def test_finish_sends_what_the_stream_did_not() -> None:
    workflow = AnswerStream()
    workflow.feed(run_pb2.RunEvent(run_id="top", run_started=run_pb2.RunStarted(agent_kind="sequential")))
    assert workflow.finish("the merged answer") == ["the merged answer"]

    trimmed = AnswerStream()
    feed(trimmed, [step(), text("answer with a trailing space ")])
    assert trimmed.finish("answer with a trailing space") == []


def test_a_later_step_starts_a_new_paragraph() -> None:
    stream = AnswerStream()
    sent = feed(stream, [step(), text("Thinking."), step(), text("The answer.")])
    assert sent == "Thinking.\n\nThe answer."
    assert stream.finish("The answer.") == []
    other = AnswerStream()
    feed(other, [step(), text("Thinking.")])
    assert other.finish("Best so far.") == ["\n\nBest so far."]


def acting(run: str = "top") -> run_pb2.RunEvent:
    return run_pb2.RunEvent(run_id=run, run_started=run_pb2.RunStarted(agent_kind="llm", may_act=True))


def test_an_agent_that_may_act_sends_only_the_step_that_answers() -> None:
    stream = AnswerStream()
    delegated = run_pb2.RunEvent(
        run_id="top", delegation_request=run_pb2.DelegationRequest(target_agent="w", task="t")
    )
    sent = feed(
        stream,
        [acting(), step(), text("Let me ask the worker."), delegated, text("worker text", "sub", ("top",))],
    )
    assert sent == ""
    sent = feed(stream, [step(), text("The worker "), text("says 42.")])
    assert sent == "", "a step's text is held until the run completes with it"
    assert stream.finish("The worker says 42.") == ["The worker ", "says 42."]
    assert stream.sent == "The worker says 42."


def test_a_tool_call_drops_its_steps_text_and_a_different_answer_is_sent_whole() -> None:
    stream = AnswerStream()
    called = run_pb2.RunEvent(run_id="top", tool_call=run_pb2.ToolCall(call_id="c", name="clock"))
    feed(stream, [acting(), step(), text("Checking the time."), called])
    assert stream.finish("(Stopped at the limit of 1 steps.)") == ["(Stopped at the limit of 1 steps.)"]
