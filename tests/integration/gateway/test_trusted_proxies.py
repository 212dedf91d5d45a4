"""Failed API keys are throttled per real client behind a reverse proxy: a gateway told
its proxy's address (`AGENTMESH_GATEWAY_TRUSTED_PROXIES`) counts failures against the client the
proxy names in X-Forwarded-For, so one guesser behind the proxy does not lock out everyone behind
it; a header from anyone else — or the part of the chain a client wrote itself — is ignored, so
a guesser cannot dodge the throttle by inventing addresses. Real HTTP to a real gateway."""

from __future__ import annotations

import httpx

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.conftest import start_gateway

# The gateway sees every test request from loopback: in the first gateway that is the proxy.
THROTTLE = {"failed_api_key_burst": 3, "failed_api_key_rate_per_second": 0.01}


async def _guess(http: httpx.AsyncClient, n: int, forwarded_for: str | None) -> int:
    headers = {"Authorization": f"Bearer amk_{n:043d}"}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    return (await http.get("/api/v1/users/me", headers=headers)).status_code


async def test_behind_a_trusted_proxy_each_client_is_throttled_on_its_own(mesh: Mesh, once: None) -> None:
    gateway = await start_gateway(mesh, trusted_proxies=["127.0.0.0/8"], **THROTTLE)
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as http:
            guesser = [await _guess(http, n, "203.0.113.5") for n in range(5)]
            assert guesser == [401, 401, 401, 429, 429]
            # Another client behind the same proxy is not held up by the guesser.
            assert await _guess(http, 9, "203.0.113.6") == 401
            # The guesser prefixing made-up hops is still the address the proxy appended last.
            assert await _guess(http, 10, "198.51.100.1, 203.0.113.5") == 429
            # A chain of trusted proxies (127.0.0.2 forwarded to the gateway's proxy) is walked.
            assert await _guess(http, 11, "203.0.113.5, 127.0.0.2") == 429
    finally:
        await gateway.stop(grace_seconds=0)


async def test_without_trusted_proxies_x_forwarded_for_is_ignored(mesh: Mesh, once: None) -> None:
    gateway = await start_gateway(mesh, **THROTTLE)
    try:
        async with httpx.AsyncClient(base_url=gateway.http.url, timeout=30) as http:
            statuses = [await _guess(http, n, f"203.0.113.{n}") for n in range(5)]
            assert statuses == [401, 401, 401, 429, 429]
    finally:
        await gateway.stop(grace_seconds=0)
