"""HTTP clients that keep to the egress policy (agentmesh/runtime/egress.py): every request they
send — the first, each redirect, each call after — is checked and connected to the address the
check named, never resolved again by the HTTP stack.

The connection goes to that address with the URL's host name kept in the Host header and as the
TLS server name (so certificates are verified against the name, as usual). Proxies from the
environment are not used: a proxy would make the connection the policy checks. The remote A2A
agents go through `httpx`, the MCP SDK through its own `httpx2`: the same transport serves both,
and the registry's webhook deliveries too.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from agentmesh.runtime.egress import EgressPolicy, EgressRefused

_DEFAULT_PORTS = {"http": 80, "https": 443}


@functools.cache
def _pinned_transport_class(http: ModuleType) -> type[Any]:
    """A transport of the HTTP library `http` (httpx or httpx2) that pins each request to the
    address the policy checked; a refusal is that library's ConnectError (so clients built on it
    report it as the connection failure it is) and an EgressRefused (so its text reaches the
    tenant)."""

    class Refused(EgressRefused, http.ConnectError):  # type: ignore[misc,name-defined]
        pass

    class PinnedTransport(http.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self, policy: EgressPolicy) -> None:
            self._policy = policy
            # A connection pool per host name: pooled connections are keyed by the address, and
            # one verified for one name must not carry a request for another on the same address.
            self._pools: dict[str, Any] = {}

        async def handle_async_request(self, request: Any) -> Any:
            url = request.url
            port = url.port or _DEFAULT_PORTS.get(url.scheme, 0)
            try:
                address = await self._policy.address_for(url.host, port)
            except EgressRefused as error:
                raise Refused(str(error), request=request) from None
            extensions = dict(request.extensions)
            if url.scheme == "https":
                extensions.setdefault("sni_hostname", url.host)
            pinned = http.Request(
                request.method,
                url.copy_with(host=address),
                headers=request.headers,  # the Host header the URL gave, kept
                stream=request.stream,
                extensions=extensions,
            )
            pool = self._pools.get(url.host)
            if pool is None:
                pool = self._pools[url.host] = http.AsyncHTTPTransport()
            return await pool.handle_async_request(pinned)

        async def aclose(self) -> None:
            for pool in self._pools.values():
                await pool.aclose()

    return PinnedTransport


def pinned_transport(policy: EgressPolicy, http: ModuleType) -> Any:
    """An `http.AsyncBaseTransport` (`http` is the httpx or httpx2 module) that keeps to `policy`;
    give it to the client as `transport=`, which also turns proxies from the environment off."""
    return _pinned_transport_class(http)(policy)
