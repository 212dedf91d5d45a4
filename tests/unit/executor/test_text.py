"""Fenced ```delegate / ```tool_call blocks are taken out of streamed text however it is split,
and text is grouped into chunks."""

from __future__ import annotations

import pytest

from agentmesh.executor.agents.text import FencedBlock, FencedBlockFilter, TextChunker, strip_blocks

ANSWER = (
    "Let me ask the worker.\n"
    '```delegate\n{"agent": "worker", "task": "Process task 42"}\n```\n'
    "And check the time:\n"
    '```tool_call\n{"name": "get_current_time", "arguments": {}}\n```\n'
    "Here is some code:\n```python\nprint('hi')\n```\nDone."
)
VISIBLE = (
    "Let me ask the worker.\n\nAnd check the time:\n\nHere is some code:\n```python\nprint('hi')\n```\nDone."
)


def feed_in_pieces(text: str, size: int) -> tuple[str, list[FencedBlock]]:
    fenced = FencedBlockFilter()
    visible = "".join(fenced.feed(text[i : i + size]) for i in range(0, len(text), size))
    return visible + fenced.finish(), fenced.blocks


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_blocks_are_taken_out_however_the_text_is_split(size: int) -> None:
    visible, blocks = feed_in_pieces(ANSWER, size)
    assert visible == VISIBLE
    assert [b.kind for b in blocks] == ["delegate", "tool_call"]
    assert blocks[0].parse() == {"agent": "worker", "task": "Process task 42"}
    assert blocks[1].parse() == {"name": "get_current_time", "arguments": {}}


def test_text_without_blocks_streams_through_at_once() -> None:
    fenced = FencedBlockFilter()
    assert fenced.feed("plain text, no fences") == "plain text, no fences"
    # Trailing backticks may open a fence: held back until the next piece says otherwise.
    assert fenced.feed("a `code` span and ``") == "a `code` span and "
    assert fenced.feed("x``") == "``x"
    assert fenced.finish() == "``"


def test_an_unterminated_block_still_counts() -> None:
    visible, blocks = strip_blocks('Sure.\n```tool_call\n{"name": "exit_loop"}')
    assert visible == "Sure.\n"
    assert blocks == [FencedBlock("tool_call", '{"name": "exit_loop"}')]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (FencedBlock("delegate", "{not json"), "not valid JSON"),
        (FencedBlock("delegate", '["worker"]'), "JSON object"),
        (FencedBlock("delegate", '{"agent": "worker"}'), '"task"'),
        (FencedBlock("tool_call", '{"arguments": {}}'), '"name"'),
        (FencedBlock("tool_call", '{"name": "x", "arguments": [1]}'), "arguments"),
    ],
)
def test_malformed_blocks_say_what_is_wrong(block: FencedBlock, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        block.parse()


def test_chunker_sends_slow_text_as_it_comes_and_groups_fast_text() -> None:
    now = [0.0]
    chunker = TextChunker(10, 0.05, clock=lambda: now[0])
    assert chunker.add("ab") == ["ab"], "the first piece goes out at once"
    assert chunker.add("cd") == []
    assert chunker.add("efghijkl") == ["cdefghijkl"], "a full chunk goes out"
    assert chunker.add("m") == []
    now[0] += 0.06
    assert chunker.add("n") == ["mn"], "a piece after a pause goes out with what waited"
    assert chunker.add("o") == []
    assert chunker.flush() == "o"
    assert chunker.flush() == ""
