"""Signing deliveries as Standard Webhooks do (https://www.standardwebhooks.com): the secret is
`whsec_` + base64 of random bytes; each attempt carries `webhook-id` (the delivery's, the same on
every attempt), `webhook-timestamp` (the attempt's, in seconds) and `webhook-signature`,
`v1,` + base64 of HMAC-SHA256 under the secret's bytes over `id.timestamp.body`. Any Standard
Webhooks library verifies them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers that sign `body`, sent as message `message_id` at `timestamp` (Unix seconds)."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    signature = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{signature}",
    }
