"""A webhook receiver on a free loopback port, in this process: it answers the statuses a test
scripts (then 200) and keeps every request it got, to be verified as a real receiver would."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    def verified(self, secret: str) -> dict[str, Any]:
        """The payload, once the official Standard Webhooks library verified its signature."""
        return Webhook(secret).verify(self.body, self.headers)  # type: ignore[no-any-return]


@dataclass
class Receiver:
    url: str
    failures: list[int] = field(default_factory=list)  # answered first, in order, then 200
    received: list[Received] = field(default_factory=list)

    def delivered(self) -> list[Received]:
        return [request for request in self.received if request.status == 200]

    def events(self) -> list[str]:
        return [json.loads(request.body)["type"] for request in self.delivered()]


@contextlib.asynccontextmanager
async def webhook_receiver(*failures: int) -> AsyncIterator[Receiver]:
    receiver = Receiver(url="")
    receiver.failures.extend(failures)

    async def receive(request: Request) -> Response:
        status = receiver.failures.pop(0) if receiver.failures else 200
        receiver.received.append(Received(dict(request.headers), await request.body(), status))
        return Response(status_code=status)

    app = Starlette(routes=[Route("/hook", receive, methods=["POST"])])
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    receiver.url = f"http://127.0.0.1:{web.servers[0].sockets[0].getsockname()[1]}/hook"
    try:
        yield receiver
    finally:
        web.should_exit = True
        await task
