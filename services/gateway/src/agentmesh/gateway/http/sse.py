"""Server-sent events: a run's RunEvents as they are (`run_events`), and the OpenAI-compatible
stream of a chat completion, picked up again by `Last-Event-ID` (DESIGN §5; docs/durability.md).

A RunEvent is one event named by its kind (`event: tool_result`), its `data` the RunEvent in the
JSON the REST API writes (run.proto: field names as in the proto, the kind under its oneof
member's name, enum values in lower case without their prefix).

Every chunk carries an SSE `id`: `<run_id>:<seq>:<sent>` — the addressed run, the highest
recorded `seq` the stream had carried, and how many characters of the answer it had sent. A
client whose connection broke sends the same request again with that id in `Last-Event-ID` (as
EventSource does by itself): the gateway follows the run in the session's log from that `seq`
(resume.py) and sends what is missing of the answer — the final answer less the characters
already sent — then the finish chunk and `[DONE]`; or the run's failure as an error chunk.
Nothing is sent twice, nothing is lost, whichever executor ends the run.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.chat_stream import ChatStream, asking_text, run_failure
from agentmesh.gateway.errors import InvalidRequest
from agentmesh.gateway.http.client_tools import client_calls, tool_call
from agentmesh.gateway.http.errors import openai_error_body, rest_error_body
from agentmesh.gateway.models import Caller
from agentmesh.gateway.project_limits import OpenStreams
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.protos import plain_dict

LAST_EVENT_ID = "Last-Event-ID"
EVENT_STREAM = "text/event-stream"


async def held_stream(
    streams: OpenStreams, caller: Caller, respond: Callable[[], Awaitable[Response]]
) -> Response:
    """The response `respond` makes (a stream), holding a stream slot of the caller and of the
    project the request was admitted to from before it is made until it has been sent, however
    that ends (the client gone, an error); QUOTA_EXCEEDED at once, before anything starts, when
    one of them is full."""
    held = contextlib.ExitStack()
    held.enter_context(streams.holding(caller.user_id))
    try:
        response = await respond()
    except BaseException:
        held.close()
        raise
    return _HeldResponse(response, held)


class _HeldResponse(Response):
    """A response that lets go of what `held` holds once it has been sent (or failed to be)."""

    def __init__(self, response: Response, held: contextlib.ExitStack) -> None:
        self._response = response
        self._held = held
        self.status_code = response.status_code
        self.background = response.background
        self.raw_headers = response.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._response.background = self.background  # FastAPI may have given it tasks to run after
        try:
            await self._response(scope, receive, send)
        finally:
            self._held.close()


async def run_events(events: AsyncIterator[run_pb2.RunEvent]) -> AsyncIterator[dict[str, str]]:
    """A run's events as server-sent events (see the module docstring); a stream that breaks
    ends with an `error` event whose data is a REST error body."""
    try:
        async for event in events:
            yield {"event": event.WhichOneof("kind") or "event", "data": json.dumps(plain_dict(event))}
    except DomainError as error:
        yield {"event": "error", "data": json.dumps(rest_error_body(error.message))}
    finally:
        await events.aclose()  # type: ignore[attr-defined]


@dataclass(frozen=True)
class StreamPosition:
    """Where a completion's stream was: its run, the last recorded seq, the answer sent."""

    run_id: str
    seq: int = 0
    sent: int = 0

    def event_id(self) -> str:
        return f"{self.run_id}:{self.seq}:{self.sent}"

    @classmethod
    def parse(cls, value: str) -> StreamPosition:
        run_id, _, rest = value.partition(":")
        seq, _, sent = rest.partition(":")
        if not run_id or not seq.isdigit() or not sent.isdigit():
            raise InvalidRequest.field(
                LAST_EVENT_ID, "must be an id this stream sent: '<run_id>:<seq>:<characters sent>'"
            )
        return cls(run_id, int(seq), int(sent))


@dataclass(frozen=True)
class ChunkShape:
    """What every chunk of one completion carries besides its delta."""

    completion_id: str
    created: int
    model: str
    include_usage: bool

    def chunk(
        self, position: StreamPosition, delta: dict[str, Any], finish: str | None = None
    ) -> dict[str, str]:
        data: dict[str, Any] = {
            **self._head(),
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            data["usage"] = None
        return {"id": position.event_id(), "data": json.dumps(data)}

    def usage(self, position: StreamPosition, usage: dict[str, Any]) -> dict[str, str]:
        data = {**self._head(), "system_fingerprint": None, "choices": [], "usage": usage}
        return {"id": position.event_id(), "data": json.dumps(data)}

    def _head(self) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }


def usage_body(usage: run_pb2.Usage) -> dict[str, Any]:
    """OpenAI's `usage`, with the whole delegation tree's tokens; beside OpenAI's fields, `cost`
    in US dollars (null when a model called has no price: unknown, not free)."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "cost": usage.cost if usage.cost_known else None,
    }


async def live_chunks(chat: ChatStream, shape: ChunkShape) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a streamed completion. Leaving early (the client went away) closes the
    run's stream, which cancels the run below."""
    sent = 0

    def here() -> StreamPosition:
        return StreamPosition(chat.run_id, chat.last_seq, sent)

    try:
        yield shape.chunk(here(), {"role": "assistant", "content": ""})
        async for text in chat.answer():
            sent += len(text)
            yield shape.chunk(here(), {"content": text})
        result = chat.result
        finish = "length" if result.max_steps_reached else "stop"
        if calls := client_calls(result.input_requests):  # the run waits for the client's tools: their calls
            yield shape.chunk(here(), _tool_calls_delta(calls))
            finish = "tool_calls"
        yield shape.chunk(here(), {}, finish)
        if shape.include_usage:
            yield shape.usage(here(), usage_body(result.usage or run_pb2.Usage()))
        yield {"data": "[DONE]"}
    except DomainError as error:
        yield {"data": json.dumps(openai_error_body(error))}
    finally:
        await chat.aclose()


async def resumed_chunks(
    events: AsyncIterator[run_pb2.RunEvent], position: StreamPosition, shape: ChunkShape
) -> AsyncIterator[dict[str, str]]:
    """The rest of a completion's stream after `position`, from the session's log: to the run's
    answer, or to what it asks when it suspended (as `ChatStream.answer` tells it)."""
    asked: list[run_pb2.InputRequest] = []
    async for event in events:
        if event.run_id != position.run_id:
            continue  # a sub-agent's or delegated worker's step: not part of the answer
        position = StreamPosition(position.run_id, max(position.seq, event.seq), position.sent)
        if event.HasField("input_requested"):
            asked.append(event.input_requested.request)
        if event.HasField("run_failed"):
            yield {"data": json.dumps(openai_error_body(run_failure(event.run_failed)))}
            return
        if event.HasField("run_suspended"):
            waits_for = [r for r in asked if r.id in event.run_suspended.request_ids]
            calls = client_calls(waits_for)
            finish = "tool_calls" if calls else "stop"
            for chunk in _rest(position, shape, asking_text(waits_for), finish, None, calls):
                yield chunk
            break
        if event.HasField("run_completed"):
            completed = event.run_completed
            finish = "length" if completed.max_steps_reached else "stop"
            for chunk in _rest(position, shape, completed.content, finish, completed.usage):
                yield chunk
            break
    yield {"data": "[DONE]"}


def _rest(
    position: StreamPosition,
    shape: ChunkShape,
    content: str,
    finish: str,
    usage: run_pb2.Usage | None,
    calls: list[run_pb2.InputRequest] | None = None,
) -> list[dict[str, str]]:
    """The end of a resumed stream: what it had not sent of `content`, the client tool calls
    the run waits for, the finish chunk, and the usage chunk when asked for."""
    rest = content[position.sent :]
    position = StreamPosition(position.run_id, position.seq, position.sent + len(rest))
    chunks = [shape.chunk(position, {"content": rest})] if rest else []
    if calls:
        chunks.append(shape.chunk(position, _tool_calls_delta(calls)))
    chunks.append(shape.chunk(position, {}, finish))
    if shape.include_usage:
        chunks.append(shape.usage(position, usage_body(usage or run_pb2.Usage())))
    return chunks


def _tool_calls_delta(calls: list[run_pb2.InputRequest]) -> dict[str, Any]:
    """A chunk's delta carrying the client tool calls a run waits for, each whole."""
    return {"tool_calls": [tool_call(request, index) for index, request in enumerate(calls)]}
