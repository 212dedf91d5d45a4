"""API keys: long-lived, revocable credentials for programs (SDKs, the CLI, OpenAI clients).

A key is `amk_` followed by 43 URL-safe characters (32 random bytes). Only its SHA-256 is stored
— the secret has 256 bits of entropy, so a plain digest cannot be brute-forced and needs no salt
or slow hash — with a 12-character display prefix to recognise it by. A key acts as its user,
within one project when it is scoped; it stops working when revoked, when it expires and while
its user is deactivated. The gateway turns a key into its user by `authenticate` (the internal
AuthenticateApiKey RPC), at most once a second per key.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime

from agentmesh.registry.errors import ApiKeyInvalid, ApiKeyNotFound, UserNotFound, ValidationFailed
from agentmesh.registry.models import ApiKey, Page, User
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.store import RegistryStore
from agentmesh.registry.validation import has_control_characters
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal
from agentmesh.runtime.revocation import CredentialStatus

API_KEY_PREFIX = "amk_"
DISPLAY_PREFIX_LENGTH = 12
MAX_KEY_NAME = 100
_KEY_FORMAT = re.compile(r"^amk_[A-Za-z0-9_-]{43}$")


def new_api_key() -> str:
    """A fresh secret: `amk_` and 43 URL-safe characters."""
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def is_api_key(secret: str) -> bool:
    """Whether the text has an API key's shape (says nothing of whether it is valid)."""
    return bool(_KEY_FORMAT.match(secret))


def api_key_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeys:
    """Creating, listing, revoking and authenticating API keys. Users manage their own keys only;
    a scoped key's project must be one the user may see."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        projects: ProjectRegistry,
        page_tokens: PageTokens,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._projects = projects
        self._pages = page_tokens
        self._now = clock

    async def create(
        self, principal: Principal, *, name: str, project_id: str = "", expires_at: datetime | None = None
    ) -> tuple[ApiKey, str]:
        """The new key and its secret (the only time the secret is known)."""
        if principal.is_system:
            raise UserNotFound("the system principal is not a user and has no API keys")
        now = self._now()
        name = name.strip()
        violations = []
        if not name:
            violations.append(FieldViolation("name", "is required"))
        elif len(name) > MAX_KEY_NAME or has_control_characters(name):
            violations.append(FieldViolation("name", f"must be 1-{MAX_KEY_NAME} printable characters"))
        if expires_at is not None and expires_at <= now:
            violations.append(FieldViolation("expires_at", "must be in the future"))
        if violations:
            raise ValidationFailed.of(violations)
        if project_id:  # NOT_FOUND unless the caller may see it
            await self._projects.get(principal, project_id=project_id)
        secret = new_api_key()
        key = ApiKey(
            id=str(uuid.uuid4()),
            user_id=principal.user_id,
            name=name,
            prefix=secret[:DISPLAY_PREFIX_LENGTH],
            key_hash=api_key_digest(secret),
            project_id=project_id or None,
            created_at=now,
            expires_at=expires_at,
        )
        async with self._store.write() as tx:
            await tx.insert_api_key(key)
        return key, secret

    async def list(
        self, principal: Principal, *, page_size: int = 0, page_token: str = "", page: int = 0
    ) -> Page[ApiKey]:
        scope = f"api_keys:{principal.user_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            found = await tx.list_api_keys(principal.user_id, request)
        items = found.items
        token = ""
        if found.has_more and items:
            token = self._pages.token((items[-1].created_at, items[-1].id), scope=scope)
        return Page(items=items, next_page_token=token, total_size=found.total)

    async def revoke(self, principal: Principal, key_id: str) -> None:
        if not key_id:
            raise ValidationFailed.of([FieldViolation("id", "is required")])
        async with self._store.write() as tx:
            key = await tx.get_api_key(key_id=key_id)
            if key is None or key.user_id != principal.user_id:
                raise ApiKeyNotFound(f"API key {key_id!r} not found")
            await tx.revoke_api_key(key_id, self._now())

    async def credential_status(self, user_id: str, key_id: str = "") -> CredentialStatus:
        """Whether the user, and the key named (by id), still stand: what every service that
        verifies access tokens compares a token's claims with (runtime/revocation.py)."""
        if not user_id:
            raise ValidationFailed.of([FieldViolation("user_id", "is required")])
        async with self._store.read() as tx:
            user = await tx.get_user(user_id)
            key = await tx.get_api_key(key_id=key_id) if key_id and user is not None else None
        if user is None:
            return CredentialStatus(user_active=False, token_version=0)
        key_active = (
            key is not None
            and key.user_id == user.id
            and key.revoked_at is None
            and (key.expires_at is None or key.expires_at > self._now())
        )
        return CredentialStatus(
            user_active=user.is_active, token_version=user.token_version, api_key_active=key_active
        )

    async def authenticate(self, secret: str) -> tuple[ApiKey, User]:
        """The key and its user; ApiKeyInvalid, naming what is wrong but never the key."""
        if not is_api_key(secret):
            raise ApiKeyInvalid("malformed API key: expected 'amk_' and 43 URL-safe characters")
        async with self._store.read() as tx:
            key = await tx.get_api_key(key_hash=api_key_digest(secret))
            user = await tx.get_user(key.user_id) if key is not None else None
        if key is None or key.revoked_at is not None or user is None:
            raise ApiKeyInvalid("API key is unknown or revoked")
        if key.expires_at is not None and key.expires_at <= self._now():
            raise ApiKeyInvalid("API key expired")
        if not user.is_active:
            raise ApiKeyInvalid("the API key's user is deactivated")
        return key, user
