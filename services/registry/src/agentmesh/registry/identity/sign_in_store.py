"""Storing what guards registration and sign-in: failed sign-ins by throttle key and the
invitations superusers issue. The transaction methods (`SignInTransaction`, part of every
`StoreTransaction`) and their SQL and in-memory implementations, mixed into each store's
transaction class. An invitation is found by the SHA-256 of its token, never by the token."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from agentmesh.registry.in_memory_state import State
from agentmesh.registry.mappers import from_row
from agentmesh.registry.models import Invitation, LoginState, PageRequest, Slice
from agentmesh.registry.pagination import keyset_slice
from agentmesh.registry.tables import InvitationRow, SignInFailureRow


class SignInTransaction(abc.ABC):
    """Failed sign-ins by throttle key, and invitations. Reads return None (or leave out) what
    does not exist."""

    @abc.abstractmethod
    async def get_sign_in_failures(self, keys: Sequence[str]) -> dict[str, LoginState]:
        """The state of each key that has one."""

    @abc.abstractmethod
    async def save_sign_in_failures(self, key: str, state: LoginState) -> None:
        """Sets the key's state (creating it)."""

    @abc.abstractmethod
    async def clear_sign_in_failures(self, key: str) -> None: ...

    @abc.abstractmethod
    async def prune_sign_in_failures(self, *, quiet_since: datetime, now: datetime) -> None:
        """Forgets keys that failed last before `quiet_since` and are not locked at `now`."""

    @abc.abstractmethod
    async def insert_invitation(self, invitation: Invitation) -> Invitation: ...

    @abc.abstractmethod
    async def get_invitation(
        self, *, invitation_id: str | None = None, token_hash: str | None = None, for_update: bool = False
    ) -> Invitation | None:
        """By id or by the SHA-256 of its token."""

    @abc.abstractmethod
    async def list_invitations(self, page: PageRequest) -> Slice[Invitation]:
        """Every invitation in (`created_at`, `id`) order, used and revoked ones included."""

    @abc.abstractmethod
    async def set_invitation_times(
        self, invitation_id: str, *, used_at: datetime | None = None, revoked_at: datetime | None = None
    ) -> None:
        """Marks the invitation used or revoked (the times given)."""


class InMemorySignIn(SignInTransaction):
    """The in-memory implementation; mixed into `InMemoryTransaction`, on its state's
    `sign_in_failures` (key → state) and `invitations` (id → invitation)."""

    _state: State

    async def get_sign_in_failures(self, keys: Sequence[str]) -> dict[str, LoginState]:
        failures = self._state.sign_in_failures
        return {key: failures[key] for key in keys if key in failures}

    async def save_sign_in_failures(self, key: str, state: LoginState) -> None:
        self._state.sign_in_failures[key] = state

    async def clear_sign_in_failures(self, key: str) -> None:
        self._state.sign_in_failures.pop(key, None)

    async def prune_sign_in_failures(self, *, quiet_since: datetime, now: datetime) -> None:
        failures = self._state.sign_in_failures
        for key, state in list(failures.items()):
            if _prunable(state, quiet_since, now):
                del failures[key]

    async def insert_invitation(self, invitation: Invitation) -> Invitation:
        self._state.invitations[invitation.id] = invitation
        return invitation

    async def get_invitation(
        self, *, invitation_id: str | None = None, token_hash: str | None = None, for_update: bool = False
    ) -> Invitation | None:
        return next(
            (
                found
                for found in self._state.invitations.values()
                if (invitation_id is None or found.id == invitation_id)
                and (token_hash is None or found.token_hash == token_hash)
            ),
            None,
        )

    async def list_invitations(self, page: PageRequest) -> Slice[Invitation]:
        return keyset_slice(list(self._state.invitations.values()), page)

    async def set_invitation_times(
        self, invitation_id: str, *, used_at: datetime | None = None, revoked_at: datetime | None = None
    ) -> None:
        found = self._state.invitations.get(invitation_id)
        if found is not None:
            changes = {"used_at": used_at} if used_at else {}
            changes |= {"revoked_at": revoked_at} if revoked_at else {}
            self._state.invitations[invitation_id] = found.model_copy(update=changes)


def _prunable(state: LoginState, quiet_since: datetime, now: datetime) -> bool:
    quiet = state.last_failed_at is None or state.last_failed_at < quiet_since
    return quiet and (state.locked_until is None or state.locked_until <= now)


class SqlSignIn(SignInTransaction):
    """The SQL implementation; mixed into `SqlStoreTransaction`, whose session and helpers
    (`_one`, `_slice`) it uses."""

    _session: AsyncSession

    async def get_sign_in_failures(self, keys: Sequence[str]) -> dict[str, LoginState]:
        rows = await self._session.scalars(sa.select(SignInFailureRow).where(SignInFailureRow.key.in_(keys)))
        return {
            row.key: LoginState(
                failed_count=row.failed_count,
                last_failed_at=row.last_failed_at,
                locked_until=row.locked_until,
            )
            for row in rows
        }

    async def save_sign_in_failures(self, key: str, state: LoginState) -> None:
        dialect = postgresql if self._session.bind.dialect.name == "postgresql" else sqlite
        values = {
            "failed_count": state.failed_count,
            "last_failed_at": state.last_failed_at,
            "locked_until": state.locked_until,
        }
        insert = dialect.insert(SignInFailureRow).values(key=key, **values)
        await self._session.execute(
            insert.on_conflict_do_update(index_elements=[SignInFailureRow.key], set_=values)
        )

    async def clear_sign_in_failures(self, key: str) -> None:
        await self._session.execute(sa.delete(SignInFailureRow).where(SignInFailureRow.key == key))

    async def prune_sign_in_failures(self, *, quiet_since: datetime, now: datetime) -> None:
        await self._session.execute(
            sa.delete(SignInFailureRow).where(
                SignInFailureRow.last_failed_at < quiet_since,
                sa.or_(SignInFailureRow.locked_until.is_(None), SignInFailureRow.locked_until <= now),
            )
        )

    async def insert_invitation(self, invitation: Invitation) -> Invitation:
        self._session.add(InvitationRow(**invitation.model_dump()))
        await self._session.flush()
        return invitation

    async def get_invitation(
        self, *, invitation_id: str | None = None, token_hash: str | None = None, for_update: bool = False
    ) -> Invitation | None:
        statement = sa.select(InvitationRow)
        if invitation_id is not None:
            statement = statement.where(InvitationRow.id == invitation_id)
        if token_hash is not None:
            statement = statement.where(InvitationRow.token_hash == token_hash)
        row = await self._one(statement, for_update)  # type: ignore[attr-defined]
        return from_row(Invitation, row) if row else None

    async def list_invitations(self, page: PageRequest) -> Slice[Invitation]:
        return await self._slice(InvitationRow, [], page, Invitation)  # type: ignore[attr-defined,no-any-return]

    async def set_invitation_times(
        self, invitation_id: str, *, used_at: datetime | None = None, revoked_at: datetime | None = None
    ) -> None:
        values = {"used_at": used_at} if used_at else {}
        values |= {"revoked_at": revoked_at} if revoked_at else {}
        if values:
            await self._session.execute(
                sa.update(InvitationRow).where(InvitationRow.id == invitation_id).values(**values)
            )
