"""Fetching a remote A2A agent's card, bounded: at most `max_bytes` read (a card is a small JSON
document; a bigger body is refused as soon as it passes the bound, never held whole) within
`timeout_seconds` all told (a server that drips a byte a second is cut there, not at the
delegation's deadline). Redirects are followed while they keep to the egress policy, which the
client's transport holds every request to.

What went wrong reaches the tenant as `CardUnavailable`, in their terms — never the body the
remote sent. The log records the URL and the outcome, never the card.
"""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseError

from agentmesh.runtime.egress import EgressRefused

logger = logging.getLogger(__name__)


class CardUnavailable(Exception):
    """The remote agent's card could not be fetched; the text says why, fit for the tenant."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the remote agent's card could not be fetched: {reason}")


async def fetch_card(
    http: httpx.AsyncClient, url: str, *, max_bytes: int, timeout_seconds: float
) -> a2a_pb2.AgentCard:
    """The agent card at `url`, read through `http`; CardUnavailable when it cannot be had."""
    try:
        async with asyncio.timeout(timeout_seconds):
            body = await _read(http, url, max_bytes)
    except TimeoutError:
        raise _unavailable(url, f"it took longer than {timeout_seconds:g}s") from None
    except EgressRefused as error:
        raise _unavailable(url, str(error)) from None
    except httpx.TooManyRedirects:
        raise _unavailable(url, f"it redirected more than {http.max_redirects} times") from None
    except httpx.HTTPError as error:
        logger.warning("agent card at %s: %s", url, type(error).__name__)
        raise _unavailable(url, "its server could not be reached") from None
    try:
        card = parse_agent_card(json.loads(body))
    except (ValueError, ParseError, TypeError, RecursionError):  # RecursionError: JSON nested too deep
        raise _unavailable(url, "the answer is not an A2A agent card") from None
    logger.info("agent card fetched from %s (%d bytes)", url, len(body))
    return card


async def _read(http: httpx.AsyncClient, url: str, max_bytes: int) -> bytes:
    # Uncompressed (asked for, and read raw): a compressed body could grow past the bound in one
    # decompressed chunk.
    request = http.build_request("GET", url, headers={"Accept-Encoding": "identity"})
    response = await http.send(request, stream=True, follow_redirects=True)
    try:
        if response.status_code != httpx.codes.OK:
            raise _unavailable(url, f"its server answered HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        body = bytearray()
        if not (declared.isdigit() and int(declared) > max_bytes):
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > max_bytes:
                    break
            else:
                return bytes(body)
        raise _unavailable(url, f"it is larger than {_size(max_bytes)}")
    finally:
        await response.aclose()


def _unavailable(url: str, reason: str) -> CardUnavailable:
    logger.warning("agent card at %s not fetched: %s", url, reason)
    return CardUnavailable(reason)


def _size(count: int) -> str:
    mib = count / (1024 * 1024)
    return f"{mib:g} MB" if mib >= 1 else f"{count} bytes"
