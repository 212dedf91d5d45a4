"""Storing API keys and moving users' token versions on: the transaction methods
(`ApiKeyTransaction`, part of every `StoreTransaction`) and their SQL and in-memory
implementations, mixed into each store's transaction class. A key is found by the SHA-256 of its
secret, never by the secret."""

from __future__ import annotations

import abc
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agentmesh.registry.models import ApiKey, PageRequest, Slice
from agentmesh.registry.tables import ApiKeyRow, UserRow

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


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

    _state: Any

    @property
    def _keys(self) -> dict[str, ApiKey]:
        return self._state.api_keys  # type: ignore[no-any-return]

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
        ordered = sorted(keys, key=lambda k: (k.created_at, k.id))
        if page.after is not None:
            ordered = [k for k in ordered if (k.created_at, k.id) > page.after]
        else:
            ordered = ordered[page.skip :]
        return Slice(items=ordered[: page.size], has_more=len(ordered) > page.size, total=len(keys))

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
