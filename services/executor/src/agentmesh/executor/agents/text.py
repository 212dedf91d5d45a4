"""Model text as it streams: fenced ```delegate / ```tool_call blocks taken out of the visible
answer (DESIGN §5, for models without function calling), and text grouped into chunks so that a
client gets a message per few words, not per token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DELEGATE = "delegate"
TOOL_CALL = "tool_call"
_KINDS = (DELEGATE, TOOL_CALL)
_FENCE = "```"
_LONGEST_INFO = 40


@dataclass(frozen=True)
class FencedBlock:
    """A ```delegate or ```tool_call block: its kind and its body as written."""

    kind: str
    body: str

    def parse(self) -> dict[str, Any]:
        """The block's JSON object, checked for the fields of its kind; ValueError says what is wrong."""
        try:
            value = json.loads(self.body)
        except json.JSONDecodeError as error:
            raise ValueError(f"the ```{self.kind} block is not valid JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise ValueError(f"the ```{self.kind} block must hold a JSON object")
        if self.kind == DELEGATE:
            for key in ("agent", "task"):
                if not isinstance(value.get(key), str) or not value[key].strip():
                    raise ValueError(f'the ```delegate block needs a non-empty string "{key}"')
        else:
            if not isinstance(value.get("name"), str) or not value["name"]:
                raise ValueError('the ```tool_call block needs a string "name"')
            if not isinstance(value.get("arguments", {}), dict):
                raise ValueError('the "arguments" of a ```tool_call block must be a JSON object')
        return value


class FencedBlockFilter:
    """Takes ```delegate and ```tool_call blocks out of streamed text.

    `feed` returns the text that is safe to show so far (it holds back what might still turn out
    to open such a block); `finish` returns the rest. Other fenced blocks (```python …) pass
    through untouched. The blocks found are in `blocks`, in order.
    """

    def __init__(self) -> None:
        self.blocks: list[FencedBlock] = []
        self._buffer = ""
        self._kind: str | None = None  # inside a block of this kind

    def feed(self, text: str) -> str:
        self._buffer += text
        visible: list[str] = []
        while True:
            if self._kind is not None:
                end = self._buffer.find(_FENCE)
                if end == -1:
                    break
                self.blocks.append(FencedBlock(self._kind, self._buffer[:end].strip()))
                self._buffer = self._buffer[end + len(_FENCE) :]
                self._kind = None
                continue
            start = self._buffer.find(_FENCE)
            if start == -1:
                # A fence may be split across chunks: hold back trailing backticks.
                keep = min(len(self._buffer) - len(self._buffer.rstrip("`")), len(_FENCE) - 1)
                cut = len(self._buffer) - keep
                visible.append(self._buffer[:cut])
                self._buffer = self._buffer[cut:]
                break
            visible.append(self._buffer[:start])
            self._buffer = self._buffer[start:]
            newline = self._buffer.find("\n")
            info = self._buffer[len(_FENCE) : newline if newline != -1 else None]
            if newline == -1:
                if len(info) <= _LONGEST_INFO and any(kind.startswith(info.strip()) for kind in _KINDS):
                    break  # wait for the rest of the info string
                visible.append(_FENCE)
                self._buffer = self._buffer[len(_FENCE) :]
                continue
            if info.strip() in _KINDS:
                self._kind = info.strip()
                self._buffer = self._buffer[newline + 1 :]
            else:
                visible.append(self._buffer[: newline + 1])
                self._buffer = self._buffer[newline + 1 :]
        return "".join(visible)

    def finish(self) -> str:
        """The text held back; an unterminated block still counts as a block."""
        rest, self._buffer = self._buffer, ""
        if self._kind is not None:
            self.blocks.append(FencedBlock(self._kind, rest.strip()))
            self._kind = None
            return ""
        return rest


def strip_blocks(text: str) -> tuple[str, list[FencedBlock]]:
    """The visible text of a whole answer and the blocks taken out of it."""
    fenced = FencedBlockFilter()
    visible = fenced.feed(text) + fenced.finish()
    return visible, fenced.blocks


class TextChunker:
    """Groups streamed text into chunks: a chunk goes out when it reaches about `chunk_chars`, or
    when `flush_seconds` have passed since the last one went out — so a slow stream's text goes
    out as it comes (the first piece at once), and a fast one's is grouped."""

    def __init__(
        self, chunk_chars: int, flush_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._chunk_chars = chunk_chars
        self._flush_seconds = flush_seconds
        self._clock = clock
        self._pending = ""
        self._last_sent: float | None = None

    def add(self, text: str) -> list[str]:
        if not text:
            return []
        self._pending += text
        now = self._clock()
        due = self._last_sent is None or now - self._last_sent >= self._flush_seconds
        if due or len(self._pending) >= self._chunk_chars:
            self._last_sent = now
            return [self.flush()]
        return []

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return text
