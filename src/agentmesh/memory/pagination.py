"""Opaque page tokens for keyset paging, bound to the query that issued them.

A token carries the sort key of the last item served and a digest of the query's filters; a token
presented with other filters, or one this service did not issue, is refused with INVALID_ARGUMENT
rather than silently paging some other result.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from agentmesh.memory.errors import InvalidPageToken

_VERSION = 1
_MAX_TOKEN_CHARS = 2048


def _digest(scope: Mapping[str, Any]) -> str:
    canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def encode_page_token(scope: Mapping[str, Any], cursor: list[Any]) -> str:
    """A token resuming after `cursor` (the last item's sort key) for the query `scope`."""
    body = json.dumps({"v": _VERSION, "q": _digest(scope), "c": cursor}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_page_token(token: str, scope: Mapping[str, Any], *, cursor_len: int) -> list[Any] | None:
    """The cursor a token carries, or None for the first page (an empty token).

    Raises InvalidPageToken when the token is malformed or was issued for other filters.
    """
    if not token:
        return None
    if len(token) > _MAX_TOKEN_CHARS:
        raise InvalidPageToken("page_token is not a token this service issued")
    try:
        padded = token + "=" * (-len(token) % 4)
        body = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidPageToken("page_token is not a token this service issued") from None
    if (
        not isinstance(body, dict)
        or body.get("v") != _VERSION
        or not isinstance(body.get("c"), list)
        or len(body["c"]) != cursor_len
    ):
        raise InvalidPageToken("page_token is not a token this service issued")
    if body.get("q") != _digest(scope):
        raise InvalidPageToken("page_token was issued for a request with other filters")
    return body["c"]
