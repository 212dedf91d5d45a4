"""Storing users, their refresh tokens and API keys: the transaction methods (`AccountTransaction`
and `ApiKeyTransaction`, parts of every `StoreTransaction`) and their SQL and in-memory
implementations, mixed into each store's transaction class. A key is found by the SHA-256 of its
secret, never by the secret; an e-mail already registered raises EmailTaken."""

from __future__ import annotations

import abc
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.errors import EmailTaken
from agentmesh.registry.in_memory_state import State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import (
    ApiKey,
    Credentials,
    NewUser,
    PageRequest,
    RefreshToken,
    Slice,
    User,
)
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.tables import ApiKeyRow, RefreshTokenRow, UserRow


class ApiKeyTransaction(abc.ABC):
    """The API key and token version operations of one transaction. Reads return None for what
    does not exist."""

    @abc.abstractmethod
    async def insert_api_key(self, key: ApiKey) -> ApiKey: ...

    @abc.abstractmethod
    async def get_api_key(self, *, key_id: str | None = None, key_hash: str | None = None) -> ApiKey | None:
        """By id or by the SHA-256 of its secret."""

    @abc.abstractmethod
    async def list_api_keys(self, user_id: str, page: PageRequest) -> Slice[ApiKey]:
        """One user's keys in (`created_at`, `id`) order, revoked ones included."""

    @abc.abstractmethod
    async def revoke_api_key(self, key_id: str, when: datetime) -> None:
        """Marks the key revoked, unless it already is."""

    @abc.abstractmethod
    async def bump_token_version(self, user_id: str) -> None:
        """Moves the user's token version on: every access token issued before stops working."""


class SqlApiKeys(ApiKeyTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers
    (`_one`, `_slice`) it uses."""

    _session: AsyncSession

    async def insert_api_key(self, key: ApiKey) -> ApiKey:
        self._session.add(ApiKeyRow(**key.model_dump()))
        await self._session.flush()
        return key

    async def get_api_key(self, *, key_id: str | None = None, key_hash: str | None = None) -> ApiKey | None:
        statement = sa.select(ApiKeyRow)
        if key_id is not None:
            statement = statement.where(ApiKeyRow.id == key_id)
        if key_hash is not None:
            statement = statement.where(ApiKeyRow.key_hash == key_hash)
        row = await self._one(statement, False)  # type: ignore[attr-defined]
        return ApiKey.model_validate(row, from_attributes=True) if row else None

    async def list_api_keys(self, user_id: str, page: PageRequest) -> Slice[ApiKey]:
        return await self._slice(ApiKeyRow, [ApiKeyRow.user_id == user_id], page, ApiKey)  # type: ignore[attr-defined,no-any-return]

    async def revoke_api_key(self, key_id: str, when: datetime) -> None:
        await self._session.execute(
            sa.update(ApiKeyRow)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=when)
        )

    async def bump_token_version(self, user_id: str) -> None:
        await self._session.execute(
            sa.update(UserRow).where(UserRow.id == user_id).values(token_version=UserRow.token_version + 1)
        )


class InMemoryApiKeys(ApiKeyTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `api_keys`
    (id → key) and `users`."""

    _state: State

    @property
    def _keys(self) -> dict[str, ApiKey]:
        return self._state.api_keys

    async def insert_api_key(self, key: ApiKey) -> ApiKey:
        self._keys[key.id] = key
        return key

    async def get_api_key(self, *, key_id: str | None = None, key_hash: str | None = None) -> ApiKey | None:
        for key in self._keys.values():
            if (key_id is None or key.id == key_id) and (key_hash is None or key.key_hash == key_hash):
                return key
        return None

    async def list_api_keys(self, user_id: str, page: PageRequest) -> Slice[ApiKey]:
        keys = [key for key in self._keys.values() if key.user_id == user_id]
        return keyset_slice(keys, page)

    async def revoke_api_key(self, key_id: str, when: datetime) -> None:
        key = self._keys.get(key_id)
        if key is not None and key.revoked_at is None:
            self._keys[key_id] = key.model_copy(update={"revoked_at": when})

    async def bump_token_version(self, user_id: str) -> None:
        credentials = self._state.users.get(user_id)
        if credentials is not None:
            user = credentials.user.model_copy(update={"token_version": credentials.user.token_version + 1})
            self._state.users[user_id] = credentials.model_copy(update={"user": user})

    async def delete_project_api_keys(self, project_id: str) -> None:
        """With its project: the keys scoped to it go (the SQL schema's foreign key does it there)."""
        for key_id in [k.id for k in self._keys.values() if k.project_id == project_id]:
            del self._keys[key_id]


class AccountTransaction(abc.ABC):
    """The user and refresh token operations of one transaction."""

    # Users.
    @abc.abstractmethod
    async def insert_user(
        self, user: NewUser, *, user_id: str, password_hash: str, now: datetime
    ) -> User: ...

    @abc.abstractmethod
    async def get_user(self, user_id: str) -> User | None: ...

    @abc.abstractmethod
    async def has_users(self) -> bool:
        """Whether any user exists at all."""

    @abc.abstractmethod
    async def get_credentials(self, email: str, *, for_update: bool = False) -> Credentials | None: ...

    @abc.abstractmethod
    async def set_password_hash(self, user_id: str, password_hash: str) -> None: ...

    @abc.abstractmethod
    async def set_user_flags(self, user_id: str, *, is_superuser: bool, is_active: bool) -> None: ...

    # Refresh tokens.
    @abc.abstractmethod
    async def insert_refresh_token(self, token: RefreshToken) -> None: ...

    @abc.abstractmethod
    async def get_refresh_token(
        self, token_hash: str, *, for_update: bool = False
    ) -> RefreshToken | None: ...

    @abc.abstractmethod
    async def mark_refresh_token_used(self, token_id: str, when: datetime) -> None: ...

    @abc.abstractmethod
    async def revoke_refresh_family(self, family_id: str, when: datetime) -> None: ...


class InMemoryAccounts(AccountTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's `users`
    (id → credentials) and `refresh_tokens` (id → token)."""

    _state: State

    # Users.

    async def insert_user(self, user: NewUser, *, user_id: str, password_hash: str, now: datetime) -> User:
        if any(known.user.email == user.email for known in self._state.users.values()):
            raise EmailTaken(f"e-mail {user.email!r} is already registered")
        stored = User(**user.model_dump(), id=user_id, is_active=True, created_at=now)
        self._state.users[user_id] = Credentials(user=stored, password_hash=password_hash)
        return stored

    async def get_user(self, user_id: str) -> User | None:
        found = self._state.users.get(user_id)
        return found.user if found else None

    async def has_users(self) -> bool:
        return bool(self._state.users)

    async def get_credentials(self, email: str, *, for_update: bool = False) -> Credentials | None:
        return next((c for c in self._state.users.values() if c.user.email == email), None)

    async def set_password_hash(self, user_id: str, password_hash: str) -> None:
        self._update_user(user_id, password_hash=password_hash)

    async def set_user_flags(self, user_id: str, *, is_superuser: bool, is_active: bool) -> None:
        if user_id in self._state.users:
            user = self._state.users[user_id].user
            self._update_user(
                user_id, user=user.model_copy(update={"is_superuser": is_superuser, "is_active": is_active})
            )

    def _update_user(self, user_id: str, **changes: object) -> None:
        if user_id in self._state.users:
            self._state.users[user_id] = self._state.users[user_id].model_copy(update=changes)

    # Refresh tokens.

    async def insert_refresh_token(self, token: RefreshToken) -> None:
        self._state.refresh_tokens[token.id] = token

    async def get_refresh_token(self, token_hash: str, *, for_update: bool = False) -> RefreshToken | None:
        return next((t for t in self._state.refresh_tokens.values() if t.token_hash == token_hash), None)

    async def mark_refresh_token_used(self, token_id: str, when: datetime) -> None:
        tokens = self._state.refresh_tokens
        if token_id in tokens:
            tokens[token_id] = tokens[token_id].model_copy(update={"used_at": when})

    async def revoke_refresh_family(self, family_id: str, when: datetime) -> None:
        tokens = self._state.refresh_tokens
        for token_id, token in list(tokens.items()):
            if token.family_id == family_id and token.revoked_at is None:
                tokens[token_id] = token.model_copy(update={"revoked_at": when})


class SqlAccounts(AccountTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers
    (`_insert`, `_one`) it uses."""

    _session: AsyncSession

    # Users.

    async def insert_user(self, user: NewUser, *, user_id: str, password_hash: str, now: datetime) -> User:
        row = UserRow(
            id=user_id,
            email=user.email,
            password_hash=password_hash,
            first_name=user.first_name,
            last_name=user.last_name,
            is_superuser=user.is_superuser,
            is_active=True,
            created_at=now,
            token_version=0,
        )
        await self._insert(  # type: ignore[attr-defined]
            row, {"email": EmailTaken(f"e-mail {user.email!r} is already registered")}
        )
        return from_row(User, row)

    async def get_user(self, user_id: str) -> User | None:
        row = await self._session.get(UserRow, user_id)
        return from_row(User, row) if row else None

    async def has_users(self) -> bool:
        return bool(await self._session.scalar(sa.select(sa.exists().select_from(UserRow))))

    async def get_credentials(self, email: str, *, for_update: bool = False) -> Credentials | None:
        row = await self._one(  # type: ignore[attr-defined]
            sa.select(UserRow).where(UserRow.email == email), for_update
        )
        if row is None:
            return None
        return Credentials(user=from_row(User, row), password_hash=row.password_hash)

    async def set_password_hash(self, user_id: str, password_hash: str) -> None:
        await self._session.execute(
            sa.update(UserRow).where(UserRow.id == user_id).values(password_hash=password_hash)
        )

    async def set_user_flags(self, user_id: str, *, is_superuser: bool, is_active: bool) -> None:
        await self._session.execute(
            sa.update(UserRow)
            .where(UserRow.id == user_id)
            .values(is_superuser=is_superuser, is_active=is_active)
        )

    # Refresh tokens.

    async def insert_refresh_token(self, token: RefreshToken) -> None:
        self._session.add(RefreshTokenRow(**token.model_dump()))
        await self._session.flush()

    async def get_refresh_token(self, token_hash: str, *, for_update: bool = False) -> RefreshToken | None:
        statement = sa.select(RefreshTokenRow).where(RefreshTokenRow.token_hash == token_hash)
        row = await self._one(  # type: ignore[attr-defined]
            statement, for_update
        )
        return from_row(RefreshToken, row) if row else None

    async def mark_refresh_token_used(self, token_id: str, when: datetime) -> None:
        await self._session.execute(
            sa.update(RefreshTokenRow).where(RefreshTokenRow.id == token_id).values(used_at=when)
        )

    async def revoke_refresh_family(self, family_id: str, when: datetime) -> None:
        await self._session.execute(
            sa.update(RefreshTokenRow)
            .where(RefreshTokenRow.family_id == family_id, RefreshTokenRow.revoked_at.is_(None))
            .values(revoked_at=when)
        )
