"""The API key part of the RegistryStore contract, over every implementation (in memory, SQLite,
PostgreSQL): keys found by id or digest only, listed per user by keyset, revoked once, gone with
their project; and token versions that only move on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agentmesh.registry.models import ApiKey, NewUser, PageRequest, Project
from agentmesh.registry.store import RegistryStore

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _id() -> str:
    return str(uuid.uuid4())


async def _user(store: RegistryStore, email: str) -> str:
    user_id = _id()
    async with store.write() as tx:
        await tx.insert_user(NewUser(email=email), user_id=user_id, password_hash="hash", now=T0)
    return user_id


def _key(user_id: str, n: int, project_id: str | None = None) -> ApiKey:
    return ApiKey(
        id=_id(),
        user_id=user_id,
        name=f"key {n}",
        prefix=f"amk_{n:08d}",
        key_hash=f"{n:064x}",
        project_id=project_id,
        created_at=T0 + timedelta(seconds=n),
        expires_at=T0 + timedelta(days=n) if n % 2 else None,
    )


async def test_keys_round_trip_list_per_user_and_revoke_once(registry_store: RegistryStore) -> None:
    ada, bob = await _user(registry_store, "ada@example.com"), await _user(registry_store, "bob@example.com")
    keys = [_key(ada, n) for n in range(1, 6)]
    async with registry_store.write() as tx:
        for key in keys:
            await tx.insert_api_key(key)
        await tx.insert_api_key(_key(bob, 9))
    async with registry_store.read() as tx:
        assert await tx.get_api_key(key_id=keys[0].id) == keys[0]
        assert await tx.get_api_key(key_hash=keys[2].key_hash) == keys[2]
        assert await tx.get_api_key(key_hash="0" * 63 + "f") is None
        first = await tx.list_api_keys(ada, PageRequest(size=2))
        after = await tx.list_api_keys(ada, PageRequest(size=10, after=(keys[1].created_at, keys[1].id)))
        skipped = await tx.list_api_keys(ada, PageRequest(size=2, skip=4))
    assert first.items == keys[:2] and first.has_more and first.total == 5
    assert after.items == keys[2:] and not after.has_more
    assert skipped.items == keys[4:]

    revoked_at = T0 + timedelta(hours=1)
    async with registry_store.write() as tx:
        await tx.revoke_api_key(keys[0].id, revoked_at)
        await tx.revoke_api_key(keys[0].id, revoked_at + timedelta(hours=1))  # the first time stays
    async with registry_store.read() as tx:
        assert (await tx.get_api_key(key_id=keys[0].id)).revoked_at == revoked_at  # type: ignore[union-attr]


async def test_keys_go_with_their_project(registry_store: RegistryStore) -> None:
    ada = await _user(registry_store, "ada@example.com")
    project = Project(id=_id(), name="Books", slug="books", owner_id=ada, created_at=T0, updated_at=T0)
    async with registry_store.write() as tx:
        await tx.insert_project(project, request_id=None)
        scoped, unscoped = _key(ada, 1, project.id), _key(ada, 2)
        await tx.insert_api_key(scoped)
        await tx.insert_api_key(unscoped)
    async with registry_store.write() as tx:
        await tx.delete_project(project.id)
    async with registry_store.read() as tx:
        assert await tx.get_api_key(key_id=scoped.id) is None
        assert await tx.get_api_key(key_id=unscoped.id) == unscoped


async def test_token_versions_start_at_zero_and_move_on(registry_store: RegistryStore) -> None:
    ada, bob = await _user(registry_store, "ada@example.com"), await _user(registry_store, "bob@example.com")
    async with registry_store.write() as tx:
        await tx.bump_token_version(ada)
        await tx.bump_token_version(ada)
        await tx.set_user_flags(ada, is_superuser=True, is_active=False)
    async with registry_store.read() as tx:
        user, other = await tx.get_user(ada), await tx.get_user(bob)
    assert user is not None and user.token_version == 2 and user.is_superuser and not user.is_active
    assert other is not None and other.token_version == 0
