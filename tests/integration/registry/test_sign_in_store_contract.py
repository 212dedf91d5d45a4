"""The sign-in part of the RegistryStore contract (failed sign-ins by throttle key, invitations),
over every implementation: in memory, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agentmesh.registry.models import Invitation, LoginState, PageRequest
from agentmesh.registry.store import RegistryStore

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


async def test_failures_are_kept_per_key_replaced_cleared_and_pruned(registry_store: RegistryStore) -> None:
    locked = LoginState(failed_count=5, last_failed_at=T0, locked_until=T0 + timedelta(minutes=5))
    async with registry_store.write() as tx:
        await tx.save_sign_in_failures("a" * 64, LoginState(failed_count=1, last_failed_at=T0))
        await tx.save_sign_in_failures("a" * 64, LoginState(failed_count=2, last_failed_at=T0))
        await tx.save_sign_in_failures("b" * 64, locked)
        await tx.save_sign_in_failures("c" * 64, LoginState(failed_count=1, last_failed_at=T0))
        await tx.clear_sign_in_failures("c" * 64)
    async with registry_store.read() as tx:
        found = await tx.get_sign_in_failures(["a" * 64, "b" * 64, "c" * 64, "d" * 64])
    assert found == {"a" * 64: LoginState(failed_count=2, last_failed_at=T0), "b" * 64: locked}

    # Quiet since before the cut-off: forgotten, unless still locked.
    async with registry_store.write() as tx:
        await tx.prune_sign_in_failures(quiet_since=T0 + timedelta(seconds=1), now=T0 + timedelta(minutes=1))
    async with registry_store.read() as tx:
        assert set(await tx.get_sign_in_failures(["a" * 64, "b" * 64])) == {"b" * 64}


def _invitation(at: datetime) -> Invitation:
    return Invitation(
        id=str(uuid.uuid4()),
        token_hash=uuid.uuid4().hex * 2,
        created_by=str(uuid.uuid4()),
        created_at=at,
        expires_at=at + timedelta(days=7),
    )


async def test_invitations_are_found_by_id_or_token_hash_listed_and_marked(
    registry_store: RegistryStore,
) -> None:
    first, second = _invitation(T0), _invitation(T0 + timedelta(seconds=1))
    async with registry_store.write() as tx:
        for invitation in (second, first):
            await tx.insert_invitation(invitation)
        await tx.set_invitation_times(first.id, used_at=T0 + timedelta(hours=1))
        await tx.set_invitation_times(second.id, revoked_at=T0 + timedelta(hours=2))
    async with registry_store.read() as tx:
        by_id = await tx.get_invitation(invitation_id=first.id)
        by_hash = await tx.get_invitation(token_hash=second.token_hash)
        unknown = await tx.get_invitation(token_hash="0" * 64)
        listed = await tx.list_invitations(PageRequest(size=1))
    assert by_id == first.model_copy(update={"used_at": T0 + timedelta(hours=1)})
    assert by_hash == second.model_copy(update={"revoked_at": T0 + timedelta(hours=2)})
    assert unknown is None
    assert ([i.id for i in listed.items], listed.has_more, listed.total) == ([first.id], True, 2)
