"""A local OpenAI-compatible chat-completions server for tests: scripted per model, streaming
`chat.completion.chunk` server-sent events (text, tool calls, usage) or failing with a status.

    async with FakeOpenAI() as server:
        server.script("gpt-test", Reply(text="Hello"), Reply(status=429))
        ... AsyncOpenAI(base_url=server.base_url, api_key="sk-...") ...
        server.requests  # every request body, with its headers
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


@dataclass
class Reply:
    """One scripted answer: a status error, or streamed text and tool calls."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    retry_after: str | None = None
    usage: tuple[int, int] = (11, 7)
    raw_arguments: str | None = None  # sent instead of the JSON of the first call's arguments
    echo_key: bool = False  # the error's message quotes the request's Authorization header


@dataclass
class Received:
    model: str
    body: dict[str, Any]
    headers: dict[str, str]


class FakeOpenAI:
    def __init__(self) -> None:
        self._scripts: dict[str, list[Reply]] = defaultdict(list)
        self.requests: list[Received] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._complete)
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.base_url = ""

    def script(self, model: str, *replies: Reply) -> None:
        """Queues replies for a model; the last one repeats once the queue is spent."""
        self._scripts[model].extend(replies)

    def for_model(self, model: str) -> list[Received]:
        return [r for r in self.requests if r.model == model]

    async def _complete(self, request: Request):
        body = await request.json()
        model = body.get("model", "")
        self.requests.append(Received(model, body, dict(request.headers)))
        queue = self._scripts.get(model) or [Reply(text="(unscripted)")]
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if reply.status != 200:
            headers = {"retry-after": reply.retry_after} if reply.retry_after else {}
            message = f"scripted {reply.status}"
            if reply.echo_key:
                message = f"Incorrect API key provided: {request.headers.get('authorization', '')}"
            return JSONResponse(
                {"error": {"message": message, "type": "test", "code": None}},
                status_code=reply.status,
                headers=headers,
            )
        return StreamingResponse(self._events(model, reply), media_type="text/event-stream")

    async def _events(self, model: str, reply: Reply):
        def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage=None) -> str:
            payload: dict[str, Any] = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage is not None:
                payload["usage"] = usage
            return f"data: {json.dumps(payload)}\n\n"

        yield chunk({"role": "assistant", "content": ""})
        words = reply.text.split(" ")
        for index, word in enumerate(words):
            yield chunk({"content": word if index == len(words) - 1 else word + " "})
        for index, (name, arguments) in enumerate(reply.tool_calls):
            text = (
                reply.raw_arguments
                if reply.raw_arguments is not None and index == 0
                else json.dumps(arguments)
            )
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, finish="tool_calls" if reply.tool_calls else "stop")
        prompt, completion = reply.usage
        yield chunk(
            None,
            usage={
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        )
        yield "data: [DONE]\n\n"

    async def __aenter__(self) -> FakeOpenAI:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None and self._task is not None
        self._server.should_exit = True
        await self._task
