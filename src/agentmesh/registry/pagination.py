"""Page tokens: opaque, signed keyset positions.

A token is `base64url(json) + "." + base64url(hmac)`. The JSON holds the sort key of the last item
served (`created_at`, `id`) and a fingerprint of the list it belongs to (which resource, whose
view, which parent), so a token cannot be forged, altered, or replayed against another list.
`page` (1-based) is also accepted for REST-style paging; it reads at an offset, the only way to
jump to page N, while tokens stay keyset-based.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import datetime

from agentmesh.registry.errors import InvalidPageToken, ValidationFailed
from agentmesh.registry.models import PageRequest
from agentmesh.runtime.errors import FieldViolation

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
_VERSION = 1
_SIGNATURE_BYTES = 16


class PageTokens:
    """Makes and checks page tokens with a key derived from the registry's secret."""

    def __init__(self, secret: str) -> None:
        self._key = hmac.new(secret.encode(), b"agentmesh.registry.page-token", hashlib.sha256).digest()

    def request(self, *, page_size: int, page_token: str, page: int, scope: str) -> PageRequest:
        """The PageRequest of a List call; INVALID_ARGUMENT for bad sizes, pages and tokens."""
        violations = []
        if page_size < 0:
            violations.append(FieldViolation("page_size", "must not be negative"))
        if page < 0:
            violations.append(FieldViolation("page", "must not be negative"))
        if page and page_token:
            violations.append(FieldViolation("page", "give either page or page_token, not both"))
        if violations:
            raise ValidationFailed.of(violations)
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        if page_token:
            return PageRequest(size=size, after=self._parse(page_token, scope))
        return PageRequest(size=size, offset=(page - 1) * size if page > 1 else 0)

    def token(self, after: tuple[datetime, str], *, scope: str) -> str:
        created_at, item_id = after
        payload = json.dumps(
            {"v": _VERSION, "s": _fingerprint(scope), "t": created_at.isoformat(), "i": item_id},
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def _parse(self, token: str, scope: str) -> tuple[datetime, str]:
        try:
            encoded_payload, _, encoded_signature = token.partition(".")
            payload = _unb64(encoded_payload)
            signature = _unb64(encoded_signature)
        except (binascii.Error, ValueError):
            raise InvalidPageToken("page token is malformed") from None
        if not hmac.compare_digest(signature, self._sign(payload)):
            raise InvalidPageToken("page token is not one this service issued")
        try:
            data = json.loads(payload)
            if data["v"] != _VERSION or data["s"] != _fingerprint(scope):
                raise InvalidPageToken("page token belongs to another list")
            return datetime.fromisoformat(data["t"]), str(data["i"])
        except (KeyError, TypeError, ValueError):
            raise InvalidPageToken("page token is malformed") from None

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _fingerprint(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    if not text:
        raise ValueError("empty")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
