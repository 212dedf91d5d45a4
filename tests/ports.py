"""Ports for servers a test must name before they start (a compose file's fixed addresses, a
PostgreSQL cluster, a metrics endpoint).

A port probed free with a bind to port 0 comes from the kernel's ephemeral range, the same range
every other process's port-0 bind and outgoing connection draws from: with tests running side by
side, one of them could take the port between the probe and the server's bind. These ports are
taken below that range instead, each pytest-xdist worker from a slice of its own, so no other
worker and no ephemeral bind can take them meanwhile.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket
from collections.abc import Iterator
from pathlib import Path

_SLICE = 800  # ports per worker
_WORKERS = 12  # slices below the ephemeral range


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _worker_index() -> int:
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) % _WORKERS if match else 0


def _slice() -> range:
    top = _ephemeral_low()
    start = max(1024, top - _WORKERS * _SLICE) + _worker_index() * _SLICE
    return range(start, min(start + _SLICE, top))


def _candidate_ports() -> Iterator[int]:
    """The slice's ports in turn, from a random one: two suites run at once on one machine (each
    with a worker gw0) then rarely probe the same port at the same moment."""
    ports = _slice()
    start = random.randrange(len(ports))
    return itertools.cycle([*ports[start:], *ports[:start]])


_candidates = _candidate_ports()


def free_loopback_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on 127.0.0.1 now, from this worker's slice."""
    ports: list[int] = []
    for _ in range(len(_slice())):
        port = next(_candidates)
        if port in ports:
            break
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or lingering from a server that just stopped
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"fewer than {count} free loopback ports in {_slice()}")


def free_loopback_port() -> int:
    """One TCP port free on 127.0.0.1 now, from this worker's slice."""
    return free_loopback_ports(1)[0]
