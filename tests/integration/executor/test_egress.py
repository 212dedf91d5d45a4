"""The egress policy on delegations to remote A2A agents (docs/security.md, "Egress"): a tenant's
remote agent at an address the policy refuses — loopback here, as the private network and the
cloud's metadata service are — is not fetched, and the delegation says so in the tenant's terms,
never with what the remote holds; a redirect out of the policy is refused as the address itself
would be; a card is bounded in size and in time.

This module's executor allows one host name, `localhost`, and nothing else (as an operator lists
an internal agent's name in AGENTMESH_EGRESS_ALLOW): its test servers are reached by that name,
while the same servers by their address (127.0.0.1) stay refused. The card time bound is 2 s.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from agentmesh.common.v1 import run_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.support import Stack, delegate, kind
from tests.polling import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]

CARD_SECONDS = 2
SECRET = "internal-secret-6f1c"
REFUSED = "is not an address this mesh may reach (an operator may allow it with AGENTMESH_EGRESS_ALLOW)"


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"egress_allow": ["localhost"], "remote_card_timeout_seconds": CARD_SECONDS}


class Remote:
    """A test server on loopback: a card that is an internal service's secret, a redirect to it,
    a 4 MB card of unannounced length, and one that drips a byte a second. `fetched` counts the
    requests per path."""

    def __init__(self) -> None:
        self.port = 0
        self.fetched: dict[str, int] = {}

    def app(self) -> Starlette:
        def counted(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                self.fetched[request.url.path] = self.fetched.get(request.url.path, 0) + 1
                return await handler(request)

            return endpoint

        async def secret(_: Request) -> Response:
            return JSONResponse({"error": f"internal service says {SECRET}"}, status_code=400)

        async def redirect(_: Request) -> Response:
            return RedirectResponse(f"http://127.0.0.1:{self.port}/secret", status_code=302)

        async def endless(_: Request) -> Response:
            async def spaces() -> AsyncIterator[bytes]:  # 4 MB, no length announced
                for _ in range(64):
                    yield b" " * 65536
                    await asyncio.sleep(0)  # the mesh shares this event loop

            return StreamingResponse(spaces(), media_type="application/json")

        async def drip(_: Request) -> Response:
            async def bytes_slowly() -> AsyncIterator[bytes]:
                while True:
                    yield b" "
                    await asyncio.sleep(1)

            return StreamingResponse(bytes_slowly(), media_type="application/json")

        handlers = {"/secret": secret, "/redirect": redirect, "/endless": endless, "/drip": drip}
        return Starlette(routes=[Route(path, counted(handler)) for path, handler in handlers.items()])


@asynccontextmanager
async def remote_server() -> AsyncIterator[Remote]:
    remote = Remote()
    # Where `localhost` leads first (the policy connects there).
    family, _, _, _, address = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family)
    listener.bind(address[:2])
    remote.port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(remote.app(), log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))

    async def started() -> bool:
        return server.started

    await eventually(started, what="the test server to start")
    try:
        yield remote
    finally:
        server.should_exit = True
        await serving


async def delegate_to(stack: Stack, card_url: str) -> run_pb2.DelegationResponse:
    """Registers `card_url` as the remote agent `far` of a new project, has an agent delegate to
    it, and returns the delegation's response."""
    project = await stack.project()
    await stack.client.registry.CreateRemoteAgent(
        reg.CreateRemoteAgentRequest(
            remote_agent=resources_pb2.RemoteAgent(project_id=project.id, name="far", card_url=card_url)
        ),
        metadata=stack.metadata,
    )
    boss = await stack.agent(
        project, "boss", network_access=["far"], mock_responses=[delegate("far", "hello"), "done"]
    )
    events = await stack.chat(boss, "go")
    (response,) = [e.delegation_response for e in events if kind(e) == "delegation_response"]
    return response


def refused_card(reason: str) -> str:
    return f"far failed: the remote agent's card could not be fetched: {reason}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def remote() -> AsyncIterator[Remote]:
    async with remote_server() as server:
        yield server


async def test_a_remote_agent_at_a_loopback_address_is_refused_without_its_body(
    stack: Stack, remote: Remote
) -> None:
    served = remote.fetched.get("/secret", 0)
    response = await delegate_to(stack, f"http://127.0.0.1:{remote.port}/secret")
    assert response.content == refused_card(f"127.0.0.1 {REFUSED}")
    assert remote.fetched.get("/secret", 0) == served  # not even connected to
    # Allowed by its name (the allow-list's), the same server is fetched — and its error body
    # still does not reach the tenant.
    reached = await delegate_to(stack, f"http://localhost:{remote.port}/secret")
    assert reached.content == refused_card("its server answered HTTP 400")
    assert SECRET not in reached.content and remote.fetched["/secret"] == served + 1


async def test_a_redirect_out_of_the_policy_is_refused(stack: Stack, remote: Remote) -> None:
    secrets_served = remote.fetched.get("/secret", 0)
    response = await delegate_to(stack, f"http://localhost:{remote.port}/redirect")
    assert response.content == refused_card(f"127.0.0.1 {REFUSED}")
    assert remote.fetched["/redirect"] >= 1 and remote.fetched.get("/secret", 0) == secrets_served


async def test_a_card_is_bounded_in_size_and_in_time(stack: Stack, remote: Remote) -> None:
    endless = await delegate_to(stack, f"http://localhost:{remote.port}/endless")
    assert endless.content == refused_card("it is larger than 1 MB")
    loop = asyncio.get_running_loop()
    started = loop.time()
    dripping = await delegate_to(stack, f"http://localhost:{remote.port}/drip")
    assert dripping.content == refused_card(f"it took longer than {CARD_SECONDS}s")
    # Cut at the card's bound, not at the delegation's deadline (minutes).
    assert loop.time() - started < 30
