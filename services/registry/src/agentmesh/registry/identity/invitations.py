"""Invitations to register, which superusers issue while registration is invite-only.

An invitation's token is `ami_` followed by 43 URL-safe characters (32 random bytes); only its
SHA-256 is stored (256 bits of entropy need no salt or slow hash, as with API keys), so the token
is known once, to the superuser who made it, who passes it on. Each is single-use and expires
(`AGENTMESH_REGISTRY_INVITATION_TTL_SECONDS`, 7 days, unless the superuser asks for another time);
a superuser may revoke one before it is used. Registering presents it (`registration.py`).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from agentmesh.registry.errors import InvitationInvalid, InvitationNotFound, ValidationFailed
from agentmesh.registry.models import Invitation, Page
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

INVITATION_PREFIX = "ami_"
DEFAULT_TTL_SECONDS = 7 * 24 * 3600
MAX_TTL_SECONDS = 90 * 24 * 3600
_SCOPE = "invitations"


def invitation_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Invitations:
    """Issuing, listing, revoking and redeeming invitations (superusers issue, list and revoke:
    the RPC policy says so)."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        clock: Callable[[], datetime],
        default_ttl_seconds: int = DEFAULT_TTL_SECONDS,
    ) -> None:
        self._store = store
        self._pages = page_tokens
        self._now = clock
        self._default_ttl = default_ttl_seconds

    async def create(self, principal: Principal, *, ttl_seconds: int = 0) -> tuple[Invitation, str]:
        """A new invitation and its token (the only time the token is known); `ttl_seconds` 0
        gives the default lifetime."""
        if not 0 <= ttl_seconds <= MAX_TTL_SECONDS:
            raise ValidationFailed.of(
                [FieldViolation("ttl_seconds", f"must be between 0 (the default) and {MAX_TTL_SECONDS}")]
            )
        now = self._now()
        token = INVITATION_PREFIX + secrets.token_urlsafe(32)
        invitation = Invitation(
            id=str(uuid.uuid4()),
            token_hash=invitation_digest(token),
            created_by=principal.user_id,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds or self._default_ttl),
        )
        async with self._store.write() as tx:
            await tx.insert_invitation(invitation)
        return invitation, token

    async def list(self, *, page_size: int = 0, page_token: str = "", page: int = 0) -> Page[Invitation]:
        """Every invitation, oldest first, used, revoked and expired ones included."""
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=_SCOPE)
        async with self._store.read() as tx:
            found = await tx.list_invitations(request)
        return self._pages.page(found, scope=_SCOPE)

    async def revoke(self, invitation_id: str) -> None:
        """Makes an unused invitation unusable; revoking a used or revoked one changes nothing."""
        if not invitation_id:
            raise ValidationFailed.of([FieldViolation("id", "is required")])
        async with self._store.write() as tx:
            invitation = await tx.get_invitation(invitation_id=invitation_id, for_update=True)
            if invitation is None:
                raise InvitationNotFound(f"invitation {invitation_id!r} not found")
            if invitation.used_at is None and invitation.revoked_at is None:
                await tx.set_invitation_times(invitation_id, revoked_at=self._now())

    async def redeem(self, tx: StoreTransaction, token: str, now: datetime) -> None:
        """Uses the invitation up within the registering transaction; InvitationInvalid for a
        missing, unknown, used, revoked or expired one alike."""
        invitation = (
            await tx.get_invitation(token_hash=invitation_digest(token), for_update=True) if token else None
        )
        if invitation is None or invitation.used_at or invitation.revoked_at or invitation.expires_at <= now:
            raise InvitationInvalid("registration is by invitation: present a valid, unused invitation")
        await tx.set_invitation_times(invitation.id, used_at=now)
