"""Invitations expire, and the shipped common-password list is read as the policy expects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.registry.errors import InvitationInvalid
from agentmesh.registry.identity.invitations import Invitations
from agentmesh.registry.identity.password_policy import PasswordPolicy, common_passwords
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.store.in_memory import InMemoryRegistryStore
from agentmesh.runtime.identity import Principal

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


async def test_an_expired_invitation_is_refused_as_any_unusable_one() -> None:
    now = [T0]
    store = InMemoryRegistryStore()
    invitations = Invitations(store, page_tokens=PageTokens("s" * 32), clock=lambda: now[0])
    _, token = await invitations.create(Principal(user_id="root", is_superuser=True), ttl_seconds=60)
    with pytest.raises(InvitationInvalid):
        async with store.write() as tx:
            await invitations.redeem(tx, token, T0 + timedelta(seconds=60))
    async with store.write() as tx:
        await invitations.redeem(tx, token, T0 + timedelta(seconds=59))


def test_the_common_password_list_is_the_shipped_ten_thousand_without_its_header() -> None:
    common = common_passwords()
    assert len(common) > 9_000  # 10,000 lines, some the same once lower-cased
    assert {"123456", "password", "qwerty123456", "#1bitch"} <= common
    assert not any(entry.startswith("# ") for entry in common)
    assert PasswordPolicy().check("correct horse battery") == []
