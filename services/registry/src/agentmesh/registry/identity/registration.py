"""Self-registration (the public RegisterUser), as the operator set it up:
`AGENTMESH_REGISTRY_REGISTRATION_MODE` is `open` (anyone registers; the default), `closed` (nobody
does: superusers create users) or `invite-only` (registering needs an invitation a superuser
issued: `invitations.py`).

A taken e-mail is never confirmed: registering one answers exactly as a new registration does (a
user, after the same password hashing), but no account is made or changed — otherwise anyone could
learn which e-mails have accounts. The person who tried then finds that signing in with the new
password fails as any wrong password does; the account's real owner still signs in with theirs.
An invitation presented with a taken e-mail is used up, as with a new account, so reusing it
tells nothing either.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from agentmesh.registry.errors import EmailTaken, RegistrationClosed
from agentmesh.registry.identity.auth import Accounts
from agentmesh.registry.identity.invitations import Invitations
from agentmesh.registry.models import NewUser, RegistrationMode, User
from agentmesh.registry.store import RegistryStore

logger = logging.getLogger(__name__)


class Registration:
    """Registers users who sign themselves up, by the registration mode."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        accounts: Accounts,
        invitations: Invitations,
        mode: RegistrationMode,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._accounts = accounts
        self._invitations = invitations
        self.mode = mode
        self._now = clock

    async def register(
        self,
        *,
        email: str,
        password: str,
        first_name: str = "",
        last_name: str = "",
        invitation_token: str = "",
    ) -> User:
        """The new user (or, for a taken e-mail, one that looks the same: see the module)."""
        if self.mode is RegistrationMode.CLOSED:
            raise RegistrationClosed("registration is closed: ask an administrator for an account")
        new_user, password_hash = await self._accounts.new_user(
            email=email, password=password, first_name=first_name, last_name=last_name
        )
        now = self._now()
        user_id = str(uuid.uuid4())
        try:
            async with self._store.write() as tx:
                if self.mode is RegistrationMode.INVITE_ONLY:
                    await self._invitations.redeem(tx, invitation_token, now)
                existing = await tx.get_credentials(new_user.email)
                if existing is None:
                    return await tx.insert_user(
                        new_user, user_id=user_id, password_hash=password_hash, now=now
                    )
        except EmailTaken:  # registered by a concurrent request meanwhile
            pass
        logger.info("registration of an e-mail that has an account answered as a new one; nothing changed")
        return _lookalike(new_user, user_id, now)


def _lookalike(new_user: NewUser, user_id: str, now: datetime) -> User:
    """What a new registration would have answered."""
    return User(**new_user.model_dump(), id=user_id, is_active=True, created_at=now)
