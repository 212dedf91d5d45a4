"""The egress policy: which addresses the mesh may connect to when it fetches a URL a tenant gave
(a remote A2A agent's card and interface, a streamable-HTTP MCP server).

A tenant picks those URLs, so without a policy the mesh would reach, on the tenant's behalf, what
only the mesh can reach: its own ports, the cloud's metadata service, the databases and admin
pages of the private network. The policy resolves the host and refuses every address that is not
globally routable — loopback, link-local, private (RFC 1918, CGNAT 100.64/10), unique-local,
unspecified, multicast, reserved — and the mesh's own listening addresses, unless the operator's
allow-list (`AGENTMESH_EGRESS_ALLOW`: CIDRs, addresses or host names) permits them. A name is
permitted only when every address it resolves to is: a name that answers with a public and a
private address is refused.

A registry checks the URLs tenants give with the same policy when they give them (`refusal`), so a
refused address is refused at once, not stored and refused at each fetch.

The address checked is the address connected to (`address_for` returns it; the HTTP transports
connect there, with the original host name in the Host header and TLS SNI), so a name cannot
resolve to a public address for the check and to a private one for the connection.

Refusals tell the tenant only that the host is not one the mesh may reach — not which address it
resolved to, nor whether it resolved at all, which would map the private network for them. The
log says which and why.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

ALLOW_SETTING = "AGENTMESH_EGRESS_ALLOW"
# What `agentmesh up --allow-loopback-egress` adds to the allow-list, for local development.
LOOPBACK = ("127.0.0.0/8", "::1")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9])?)*")


class EgressRefused(Exception):
    """A URL the egress policy does not let the mesh reach; its text is fit for the tenant."""


def allow_entries(value: object) -> object:
    """The allow-list setting as a list of entries: a JSON list, or comma-separated; a bad entry
    stops the service at start, named (a settings validator)."""
    if isinstance(value, str):
        value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
    if isinstance(value, list | tuple):
        value = [str(entry).strip() for entry in value if str(entry).strip()]
        _parse_allow_list(value)
    return value


def _parse_allow_list(entries: Iterable[str]) -> tuple[list[Network], frozenset[str]]:
    networks: list[Network] = []
    hosts: set[str] = set()
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            continue
        except ValueError:
            pass
        host = entry.strip().lower().rstrip(".")
        if not _HOST_NAME.fullmatch(host):
            raise ValueError(f"{ALLOW_SETTING}: not a CIDR, an address or a host name: {entry!r}")
        hosts.add(host)
    return networks, frozenset(hosts)


def _split_endpoint(endpoint: str) -> tuple[str, int] | None:
    host, _, port = endpoint.rpartition(":")
    if not port.isdigit():
        return None
    return host.strip("[]").lower(), int(port)


def _comparable(address: Address) -> Address:
    """The IPv4 address an IPv6 form carries (mapped, NAT64, 6to4), else the address itself: the
    same host is judged the same however it is written."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def _kind(address: Address) -> str:
    """Why an address is refused when not allowed ("" when it is a public address)."""
    for kind, refused in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("not globally routable", not address.is_global),
    ):
        if refused:
            return kind
    return ""


class EgressPolicy:
    """Decides which addresses a tenant's URL may lead the mesh to, and names the one to connect
    to (see the module's docstring). `mesh_endpoints` are the `host:port`s the mesh listens on."""

    def __init__(self, allow: Sequence[str] = (), *, mesh_endpoints: Sequence[str] = ()) -> None:
        self._networks, self._hosts = _parse_allow_list(allow)
        self._mesh = [split for split in map(_split_endpoint, mesh_endpoints) if split is not None]

    async def address_for(self, host: str, port: int) -> str:
        """The address to connect to for `host`:`port`, checked; EgressRefused when the policy
        does not let the mesh reach it (or the name does not resolve)."""
        name = host.strip("[]").lower().rstrip(".")
        addresses = await self._resolve(name, port)
        if name in self._hosts:
            return str(addresses[0])
        for address in addresses:
            reason = await self._refusal(address, port)
            if reason:
                logger.warning("egress to %s:%d refused: %s is %s", name, port, address, reason)
                raise EgressRefused(_refused(host))
        return str(addresses[0])

    def allow_listed(self, host: str) -> bool:
        """Whether the operator's allow-list names `host` (a host name it lists, or an address in
        a network it lists): where the mesh may go although the address is not a public one."""
        name = host.strip("[]").lower().rstrip(".")
        if name in self._hosts:
            return True
        try:
            return self._allowed(ipaddress.ip_address(name))
        except ValueError:
            return False

    async def refusal(self, url: str) -> str:
        """Why the mesh must not be pointed at `url` ("" when it may be), for a registry checking
        a URL when a tenant gives it: its host is an address the policy refuses, or a name that
        resolves now to one. A name that does not resolve now is not refused here (its DNS record
        may come later); every fetch checks again, so this is an early answer, not the guard."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return ""  # not a URL at all: the caller's own checks say so
        name = host.lower().rstrip(".")
        if not name or name in self._hosts:
            return ""
        try:
            addresses = await _lookup(name, port)
        except (OSError, UnicodeError):
            return ""
        for address in addresses:
            reason = await self._refusal(address, port)
            if reason:
                logger.info("a URL at %s:%d refused at registration: %s is %s", name, port, address, reason)
                return _refused(host)
        return ""

    async def _resolve(self, name: str, port: int) -> list[Address]:
        try:
            return await _lookup(name, port)
        except (OSError, UnicodeError) as error:
            logger.warning("egress to %s:%d refused: it does not resolve (%s)", name, port, error)
            raise EgressRefused(_refused(name)) from None

    def _allowed(self, address: Address) -> bool:
        return any(
            candidate in network
            for candidate in {address, _comparable(address)}
            for network in self._networks
            if candidate.version == network.version
        )

    async def _refusal(self, address: Address, port: int) -> str:
        if self._allowed(address):
            return ""
        kind = _kind(_comparable(address)) or _kind(address)
        if kind:
            return kind
        if await self._is_mesh(address, port):
            return "one of the mesh's own listening addresses"
        return ""

    async def _is_mesh(self, address: Address, port: int) -> bool:
        """Whether `address`:`port` is where one of the mesh's services listens (a service bound
        to every interface listens on each of this machine's addresses)."""
        for host, mesh_port in self._mesh:
            if mesh_port != port:
                continue
            try:
                unspecified = ipaddress.ip_address(host).is_unspecified
            except ValueError:
                unspecified = not host
            try:
                if address in await _lookup(socket.gethostname() if unspecified else host, port):
                    return True
            except (OSError, UnicodeError):
                continue
        return False


async def _lookup(name: str, port: int) -> list[Address]:
    """The addresses `name` stands for (itself when it is one); OSError when it resolves to none."""
    try:
        return [ipaddress.ip_address(name)]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
    addresses: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OSError(f"{name} resolves to no address")
    return addresses


def _refused(host: str) -> str:
    return f"{host} is not an address this mesh may reach (an operator may allow it with {ALLOW_SETTING})"
