"""Paging shared by every List call: page sizes and opaque page tokens for keyset queries.

A token is `base64url(json)`, followed by `"." + base64url(hmac)` when the codec has a key. The
JSON holds a format version, a digest of the token's scope (which list it pages: the resource,
whose view, which filters) and the cursor (the sort key of the last item served). A token
presented for another scope is refused; a signed one cannot be forged or altered either. An
unsigned token is still scope-bound and checked for shape, but a caller can write one by hand, so
services read its cursor values with `cursor_int`, `cursor_str` and `cursor_datetime`, which
refuse what the service could not have issued.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agentmesh.runtime.errors import InvalidPageToken

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
MAX_TOKEN_CHARS = 2048

# The payload keys (`v`, `q`, `c`) are those of the memory service's earlier unsigned tokens, so
# such tokens stay valid for services that still do not sign.
_VERSION = 1
_SIGNATURE_BYTES = 16
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_INT64 = range(-(2**63), 2**63)

_OTHER_SCOPE = "page_token was issued for a request with other filters"

Scope = str | Mapping[str, Any]


def clamp_page_size(requested: int, *, default: int = DEFAULT_PAGE_SIZE) -> int:
    """How many items a page holds for a request's `page_size`: `default` for 0, at most
    MAX_PAGE_SIZE. Callers refuse negative sizes first, as a violation of their own request."""
    if requested < 0:
        raise ValueError("a negative page size must be refused before it is clamped")
    return min(requested or default, MAX_PAGE_SIZE)


class PageTokenCodec:
    """Makes and reads page tokens: signed when constructed with a key, always bound to a scope."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key

    @classmethod
    def from_secret(cls, secret: str, *, purpose: str) -> PageTokenCodec:
        """A codec signing with a key derived from `secret` for `purpose` (so one service's
        tokens are not another's), or an unsigned one when there is no secret."""
        if not secret:
            return cls()
        return cls(hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest())

    def encode(self, scope: Scope, cursor: Sequence[Any]) -> str:
        """A token resuming after `cursor` (the last item's sort key, JSON values) in `scope`."""
        payload = json.dumps(
            {"v": _VERSION, "q": _digest(scope), "c": list(cursor)}, separators=(",", ":"), ensure_ascii=False
        ).encode()
        token = _b64(payload) if self._key is None else f"{_b64(payload)}.{_b64(_sign(self._key, payload))}"
        if len(token) > MAX_TOKEN_CHARS:
            raise ValueError(f"a cursor of {len(token)} token characters is longer than decode accepts")
        return token

    def decode(self, token: str, scope: Scope, *, cursor_len: int) -> list[Any] | None:
        """The cursor a token carries (`cursor_len` values), or None for the first page (an
        empty token).

        Raises InvalidPageToken when the token is malformed, not signed by this codec's key, or
        was issued for another scope.
        """
        if not token:
            return None
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidPageToken()
        encoded_payload, dot, encoded_signature = token.partition(".")
        payload = _unb64(encoded_payload)
        if self._key is None:
            if dot:  # a signed token: not one this codec issued
                raise InvalidPageToken()
        elif not hmac.compare_digest(_unb64(encoded_signature), _sign(self._key, payload)):
            raise InvalidPageToken()
        try:
            body = json.loads(payload)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise InvalidPageToken() from None
        if (
            not isinstance(body, dict)
            or body.get("v") != _VERSION
            or not isinstance(body.get("c"), list)
            or len(body["c"]) != cursor_len
        ):
            raise InvalidPageToken()
        if body.get("q") != _digest(scope):
            raise InvalidPageToken(_OTHER_SCOPE)
        return body["c"]


def cursor_int(value: Any) -> int:
    """A cursor value that must be a 64-bit integer (a database key)."""
    if type(value) is not int or value not in _INT64:
        raise InvalidPageToken()
    return value


def cursor_str(value: Any) -> str:
    """A cursor value that must be a string."""
    if not isinstance(value, str):
        raise InvalidPageToken()
    return value


def cursor_datetime(value: Any) -> datetime:
    """A cursor value that must be a timezone-aware ISO 8601 time."""
    try:
        moment = datetime.fromisoformat(cursor_str(value))
    except ValueError:
        raise InvalidPageToken() from None
    if moment.tzinfo is None:
        raise InvalidPageToken()
    return moment


def _sign(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _digest(scope: Scope) -> str:
    canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    # Strict: urlsafe_b64decode would skip characters outside the alphabet instead of refusing.
    if not _BASE64URL.fullmatch(text):
        raise InvalidPageToken()
    try:
        text = text.rstrip("=")
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise InvalidPageToken() from None
