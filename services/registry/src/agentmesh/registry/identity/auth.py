"""Identity: users, passwords, sign-in with throttling, and rotating refresh tokens.

- Passwords are hashed with argon2id (OWASP parameters by default: m=19456 KiB, t=2, p=1) in a
  worker thread, so hashing never blocks the event loop.
- Access tokens are short-lived JWTs (`runtime.identity.TokenCodec`).
- Refresh tokens are random; only their HMAC-SHA-256 is stored. Each is single-use: exchanging
  one marks it used and issues the next of its family (one sign-in). Presenting a used token again
  means it leaked, so the whole family is revoked.
- Access tokens carry the user's token version (claim `ver`). It moves on at logout, refresh-token
  reuse, deactivation and role changes; gateways compare it (`user_status`) at most once a
  second per user and refuse older tokens, so revocation takes effect within a second.
- Repeated failed sign-ins lock the account *from that client address* for a while, and many
  failures from one address lock that address (identity/sign_in_throttle.py); while locked, sign-in
  fails with RESOURCE_EXHAUSTED and `retry_after_seconds`. Unknown e-mails get the same answers
  after the same work (an argon2 verification against a dummy hash) as known ones.
- A password is checked against the policy whenever one is set (identity/password_policy.py).
  Self-registration, with its modes and invitations, is `identity/registration.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

from agentmesh.registry.errors import (
    CannotChangeSelf,
    EmailTaken,
    InvalidCredentials,
    RefreshTokenInvalid,
    RefreshTokenReused,
    UserInactive,
    UserNotFound,
    ValidationFailed,
)
from agentmesh.registry.identity.password_policy import PasswordPolicy
from agentmesh.registry.identity.sign_in_throttle import SignInThrottle
from agentmesh.registry.models import (
    Credentials,
    IssuedTokens,
    NewUser,
    RefreshToken,
    User,
    UserStatus,
)
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.validation import check_registration, normalize_email, update_paths
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal, TokenCodec

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Passwords:
    """argon2id hashing and verification, off the event loop."""

    def __init__(self, *, time_cost: int = 2, memory_kib: int = 19456, parallelism: int = 1) -> None:
        self._hasher = PasswordHasher(
            time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism, type=Type.ID
        )
        self._dummy_hash: str | None = None

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._hasher.hash, password)

    async def verify(self, password_hash: str, password: str) -> bool:
        return await asyncio.to_thread(self._verify, password_hash, password)

    async def burn(self, password: str) -> None:
        """Spends the time a verification would, so unknown e-mails answer no faster."""
        if self._dummy_hash is None:
            self._dummy_hash = await self.hash(secrets.token_hex(16))
        await self.verify(self._dummy_hash, password)

    def needs_rehash(self, password_hash: str) -> bool:
        return self._hasher.check_needs_rehash(password_hash)

    def _verify(self, password_hash: str, password: str) -> bool:
        try:
            return self._hasher.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False


class RefreshTokenCodec:
    """Makes refresh tokens and the keyed digests stored in their place."""

    def __init__(self, secret: str) -> None:
        self._key = hmac.new(secret.encode(), b"agentmesh.registry.refresh-token", hashlib.sha256).digest()

    def new(self) -> tuple[str, str]:
        token = secrets.token_urlsafe(32)
        return token, self.digest(token)

    def digest(self, token: str) -> str:
        return hmac.new(self._key, token.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class CreatedUser:
    """What `Accounts.create_user` did: made `user` anew, or `promoted` an existing one to superuser."""

    user: User
    promoted: bool = False


class Accounts:
    """Users and their sign-in: users made by superusers, login, refresh-token rotation and
    revocation, the current user, and the superuser bootstrap."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        tokens: TokenCodec,
        passwords: Passwords,
        refresh_tokens: RefreshTokenCodec,
        refresh_ttl_seconds: int,
        throttle: SignInThrottle,
        policy: PasswordPolicy,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._tokens = tokens
        self._passwords = passwords
        self._refresh_tokens = refresh_tokens
        self._refresh_ttl = timedelta(seconds=refresh_ttl_seconds)
        self._throttle = throttle
        self._policy = policy
        self._now = clock

    async def new_user(
        self,
        *,
        email: str,
        password: str,
        first_name: str = "",
        last_name: str = "",
        is_superuser: bool = False,
    ) -> tuple[NewUser, str]:
        """A user to insert and its password's hash, once the input and the password policy
        pass; ValidationFailed naming every field that does not."""
        email = normalize_email(email)
        first_name, last_name = first_name.strip(), last_name.strip()
        violations = check_registration(email, first_name, last_name) + self._policy.check(password)
        if violations:
            raise ValidationFailed.of(violations)
        password_hash = await self._passwords.hash(password)
        new_user = NewUser(email=email, first_name=first_name, last_name=last_name, is_superuser=is_superuser)
        return new_user, password_hash

    async def add_user(
        self,
        *,
        email: str,
        password: str,
        first_name: str = "",
        last_name: str = "",
        is_superuser: bool = False,
    ) -> User:
        """A user made by an operator (a superuser, the bootstrap): EmailTaken when the e-mail is."""
        new_user, password_hash = await self.new_user(
            email=email,
            password=password,
            first_name=first_name,
            last_name=last_name,
            is_superuser=is_superuser,
        )
        async with self._store.write() as tx:
            return await tx.insert_user(
                new_user, user_id=str(uuid.uuid4()), password_hash=password_hash, now=self._now()
            )

    async def create_user(
        self,
        *,
        email: str,
        password: str,
        first_name: str = "",
        last_name: str = "",
        is_superuser: bool = False,
    ) -> CreatedUser:
        """A user made by a superuser. For a superuser, an existing user of that e-mail is promoted
        instead (reactivated, its password set): idempotent, as the bootstrap at start is. Raises
        ValidationFailed for bad input and EmailTaken when a plain user of that e-mail exists."""
        try:
            user = await self.add_user(
                email=email,
                password=password,
                first_name=first_name,
                last_name=last_name,
                is_superuser=is_superuser,
            )
            return CreatedUser(user)
        except EmailTaken:
            if not is_superuser:
                raise
        user = await self.ensure_superuser(email=email, password=password, reset_password=True)
        return CreatedUser(user, promoted=True)

    async def login(self, *, email: str, password: str, client_address: str = "") -> IssuedTokens:
        """Tokens for the right password. Wrong e-mail and wrong password answer alike, after
        the same work, and are throttled alike by account and `client_address`."""
        email = normalize_email(email)
        violations = []
        if not email:
            violations.append(FieldViolation("email", "is required"))
        if not password:
            violations.append(FieldViolation("password", "is required"))
        if violations:
            raise ValidationFailed.of(violations)
        had_failures = await self._throttle.check(email, client_address)
        async with self._store.read() as tx:
            credentials = await tx.get_credentials(email)
        if credentials is None:
            await self._passwords.burn(password)
        if credentials is None or not await self._passwords.verify(credentials.password_hash, password):
            await self._throttle.failed(email, client_address)
            raise InvalidCredentials("wrong e-mail or password")
        if had_failures:
            await self._throttle.succeeded(email, client_address)
        if not credentials.user.is_active:
            raise UserInactive("this account is deactivated")
        return await self._signed_in(credentials, password)

    async def refresh(self, refresh_token: str) -> IssuedTokens:
        if not refresh_token:
            raise ValidationFailed.of([FieldViolation("refresh_token", "is required")])
        now = self._now()
        reused = False
        async with self._store.write() as tx:
            stored = await tx.get_refresh_token(self._refresh_tokens.digest(refresh_token), for_update=True)
            if stored is None or stored.revoked_at is not None or stored.expires_at <= now:
                raise RefreshTokenInvalid("refresh token is unknown, expired or revoked")
            if stored.used_at is not None:
                logger.warning("refresh token reused; revoking its sign-in (user %s)", stored.user_id)
                await tx.revoke_refresh_family(stored.family_id, now)
                await tx.bump_token_version(stored.user_id)  # a leak: its access tokens go too
                reused = True
            else:
                user = await tx.get_user(stored.user_id)
                if user is None or not user.is_active:
                    raise UserInactive("this account is deactivated")
                await tx.mark_refresh_token_used(stored.id, now)
                token = await self._new_refresh_token(tx, user.id, stored.family_id, now)
        if reused:  # raised after the commit, so the revocation stays
            raise RefreshTokenReused("refresh token was already used; sign in again")
        return self._issued(user, token)

    async def revoke(self, refresh_token: str) -> None:
        """Ends the sign-in a refresh token belongs to, and the user's access tokens with it (its
        token version moves on: access tokens carry no sign-in, so every one of them goes).
        Unknown tokens are ignored, so revoking is idempotent and tells nothing about which
        tokens exist."""
        if not refresh_token:
            raise ValidationFailed.of([FieldViolation("refresh_token", "is required")])
        async with self._store.write() as tx:
            stored = await tx.get_refresh_token(self._refresh_tokens.digest(refresh_token), for_update=True)
            if stored is not None:
                await tx.revoke_refresh_family(stored.family_id, self._now())
                await tx.bump_token_version(stored.user_id)

    async def current_user(self, principal: Principal) -> User:
        if principal.is_system:
            raise UserNotFound("the system principal is not a user")
        async with self._store.read() as tx:
            user = await tx.get_user(principal.user_id)
        if user is None or not user.is_active:
            raise UserInactive("this account no longer exists or is deactivated")
        return user

    async def update_user(
        self, principal: Principal, user_id: str, *, mask: list[str], is_active: bool, is_superuser: bool
    ) -> User:
        """Changes the fields in `mask` (is_active, is_superuser); any change revokes the user's
        access tokens. A superuser may not deactivate or demote itself."""
        paths, violations = update_paths(mask, ("is_active", "is_superuser"))
        if not user_id:
            violations.insert(0, FieldViolation("user.id", "is required"))
        if violations:
            raise ValidationFailed.of(violations)
        async with self._store.write() as tx:
            user = await tx.get_user(user_id)
            if user is None:
                raise UserNotFound(f"user {user_id!r} not found")
            changed = user.model_copy(
                update={
                    "is_active": is_active if "is_active" in paths else user.is_active,
                    "is_superuser": is_superuser if "is_superuser" in paths else user.is_superuser,
                }
            )
            if changed == user:
                return user
            if user.id == principal.user_id:
                raise CannotChangeSelf("you may not deactivate or demote yourself")
            await tx.set_user_flags(user.id, is_superuser=changed.is_superuser, is_active=changed.is_active)
            await tx.bump_token_version(user.id)
        logger.info(
            "user %s changed: active=%s superuser=%s", user.id, changed.is_active, changed.is_superuser
        )
        return changed.model_copy(update={"token_version": user.token_version + 1})

    async def user_status(self, user_id: str) -> UserStatus:
        """What a gateway checks a user's tokens against; `exists` False for a deleted user."""
        if not user_id:
            raise ValidationFailed.of([FieldViolation("user_id", "is required")])
        async with self._store.read() as tx:
            user = await tx.get_user(user_id)
        if user is None:
            return UserStatus(exists=False)
        return UserStatus(
            exists=True,
            is_active=user.is_active,
            is_superuser=user.is_superuser,
            token_version=user.token_version,
        )

    async def create_first_user(self, *, email: str, password: str) -> User | None:
        """A superuser made only when the registry has no user at all — a fresh mesh that nobody
        could sign in to yet; None when it has one (nothing changes)."""
        async with self._store.read() as tx:
            if await tx.has_users():
                return None
        user = await self.add_user(email=email, password=password, is_superuser=True)
        logger.info("created superuser %s, the first user", user.email)
        return user

    async def ensure_superuser(self, *, email: str, password: str, reset_password: bool = False) -> User:
        """Makes sure a superuser with this e-mail exists (idempotent): creates it, or promotes and
        reactivates an existing user; its password changes only with `reset_password`."""
        email = normalize_email(email)
        # The policy applies only where a password is set (creating, resetting): a bootstrap
        # superuser made under an older policy still starts.
        violations = check_registration(email, "", "")
        if violations:
            raise ValidationFailed.of(violations)
        async with self._store.read() as tx:
            credentials = await tx.get_credentials(email)
        if credentials is None:
            try:
                user = await self.add_user(email=email, password=password, is_superuser=True)
                logger.info("created superuser %s", email)
                return user
            except EmailTaken:  # another replica bootstrapped it meanwhile
                async with self._store.read() as tx:
                    credentials = await tx.get_credentials(email)
                assert credentials is not None
        new_hash = None
        if reset_password and not await self._passwords.verify(credentials.password_hash, password):
            if violations := self._policy.check(password):
                raise ValidationFailed.of(violations)
            new_hash = await self._passwords.hash(password)
        user = credentials.user
        if user.is_superuser and user.is_active and new_hash is None:
            return user
        async with self._store.write() as tx:
            await tx.set_user_flags(user.id, is_superuser=True, is_active=True)
            if not (user.is_superuser and user.is_active):
                await tx.bump_token_version(user.id)  # a role change, as in update_user
            if new_hash is not None:
                await tx.set_password_hash(user.id, new_hash)
        logger.info("ensured superuser %s", email)
        bumped = 0 if user.is_superuser and user.is_active else 1
        return user.model_copy(
            update={"is_superuser": True, "is_active": True, "token_version": user.token_version + bumped}
        )

    async def _signed_in(self, credentials: Credentials, password: str) -> IssuedTokens:
        new_hash = None
        if self._passwords.needs_rehash(credentials.password_hash):
            new_hash = await self._passwords.hash(password)
        now = self._now()
        user = credentials.user
        async with self._store.write() as tx:
            if new_hash is not None:
                await tx.set_password_hash(user.id, new_hash)
            token = await self._new_refresh_token(tx, user.id, str(uuid.uuid4()), now)
        return self._issued(user, token)

    async def _new_refresh_token(
        self, tx: StoreTransaction, user_id: str, family_id: str, now: datetime
    ) -> str:
        token, digest = self._refresh_tokens.new()
        await tx.insert_refresh_token(
            RefreshToken(
                id=str(uuid.uuid4()),
                user_id=user_id,
                family_id=family_id,
                token_hash=digest,
                created_at=now,
                expires_at=now + self._refresh_ttl,
            )
        )
        return token

    def _issued(self, user: User, refresh_token: str) -> IssuedTokens:
        principal = Principal(
            user_id=user.id,
            is_superuser=user.is_superuser,
            email=user.email,
            token_version=user.token_version,
        )
        return IssuedTokens(
            access_token=self._tokens.issue(principal),
            refresh_token=refresh_token,
            expires_in=self._tokens.access_ttl_seconds,
        )
