"""Who is calling: access tokens (JWT, HS256) and the principal they carry across hops.

The registry issues tokens; every service verifies them with the same secret. A request keeps
the caller's own token on every internal hop (`authorization` metadata), so each service can tell
who it works for; services calling on their own behalf use a short-lived system token.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import jwt

from agentmesh.runtime.errors import Unauthenticated

ALGORITHM = "HS256"
AUTHORIZATION = "authorization"
SYSTEM_SUBJECT = "system"
# Verified tokens remembered per codec (a caller sends the same token on every call and hop).
VERIFIED_CACHE_SIZE = 1024


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of a request."""

    user_id: str
    is_superuser: bool = False
    email: str = ""

    @property
    def is_system(self) -> bool:
        return self.user_id == SYSTEM_SUBJECT


SYSTEM = Principal(user_id=SYSTEM_SUBJECT, is_superuser=True)

current_principal: ContextVar[Principal | None] = ContextVar("agentmesh_principal", default=None)
current_token: ContextVar[str | None] = ContextVar("agentmesh_token", default=None)


class TokenCodec:
    """Issues and verifies access tokens with one secret. Rejects `alg=none`, bad signatures,
    expired tokens and tokens of another type."""

    def __init__(self, secret: str, *, access_ttl_seconds: int = 900, issuer: str = "agentmesh") -> None:
        if len(secret) < 32:
            raise ValueError("the JWT secret must be at least 32 characters")
        self._secret = secret
        self.access_ttl_seconds = access_ttl_seconds
        self._issuer = issuer
        # token -> (principal, exp): tokens that verified, until they expire. Keyed by the exact
        # string, so any change to a token (its signature included) misses and is verified anew.
        self._verified: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        self._verified_lock = threading.Lock()

    def issue(self, principal: Principal, *, ttl_seconds: int | None = None) -> str:
        now = int(time.time())
        claims = {
            "sub": principal.user_id,
            "su": principal.is_superuser,
            "email": principal.email,
            "iss": self._issuer,
            "iat": now,
            "exp": now + (ttl_seconds or self.access_ttl_seconds),
            "jti": uuid.uuid4().hex,
            "typ": "access",
        }
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def system_token(self) -> str:
        return self.issue(SYSTEM, ttl_seconds=300)

    def verify(self, token: str) -> Principal:
        with self._verified_lock:
            hit = self._verified.get(token)
            if hit is not None:
                if time.time() < hit[1]:
                    self._verified.move_to_end(token)
                    return hit[0]
                del self._verified[token]
        principal, expires_at = self._decode(token)
        with self._verified_lock:
            self._verified[token] = (principal, expires_at)
            if len(self._verified) > VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        return principal

    def _decode(self, token: str) -> tuple[Principal, float]:
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                issuer=self._issuer,
                options={"require": ["sub", "exp", "iat", "typ"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise Unauthenticated("access token expired", reason="TOKEN_EXPIRED") from error
        except jwt.PyJWTError as error:
            raise Unauthenticated("invalid access token", reason="TOKEN_INVALID") from error
        if claims.get("typ") != "access":
            raise Unauthenticated("not an access token", reason="TOKEN_INVALID")
        principal = Principal(
            user_id=claims["sub"], is_superuser=bool(claims.get("su")), email=claims.get("email", "")
        )
        return principal, float(claims["exp"])


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an `authorization: Bearer …` entry, or None."""
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


def authenticate(codec: TokenCodec, metadata: Sequence[tuple[str, str | bytes]] | None) -> Principal:
    """The principal of a call's metadata; UNAUTHENTICATED when it has no valid token."""
    token = bearer_token(metadata)
    if token is None:
        raise Unauthenticated("missing bearer token", reason="TOKEN_MISSING")
    return codec.verify(token)
