"""Over https, the egress transport connects to the address it checked yet verifies the server's
certificate against the URL's host name (sent as the TLS server name, and in the Host header): a
certificate for `localhost` serves `https://localhost`, and is refused for `https://127.0.0.1` —
also when a connection to the same address, verified for the name, is open in the same client."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from agentmesh.runtime.egress import LOOPBACK, EgressPolicy
from agentmesh.runtime.egress_http import pinned_transport
from tests.certificates import CertificateAuthority
from tests.polling import eventually


async def test_the_certificate_is_verified_against_the_host_name_not_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)[0][4][0] != "127.0.0.1":
        pytest.skip("localhost leads elsewhere than 127.0.0.1 on this machine")
    ca = CertificateAuthority(tmp_path)
    served = ca.issue("localhost-only", with_address=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_file))  # the transport trusts this CA only

    async def host(request: Request) -> Response:
        return PlainTextResponse(request.headers["host"])

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        Starlette(routes=[Route("/", host)]),
        ssl_certfile=str(served.cert_file),
        ssl_keyfile=str(served.key_file),
        log_level="warning",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))

    async def started() -> bool:
        return server.started

    await eventually(started, what="the https server to start")
    try:
        async with httpx.AsyncClient(transport=pinned_transport(EgressPolicy(LOOPBACK), httpx)) as client:
            by_name = await client.get(f"https://localhost:{port}/")
            assert (by_name.status_code, by_name.text) == (200, f"localhost:{port}")
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(f"https://127.0.0.1:{port}/")
    finally:
        server.should_exit = True
        await serving
