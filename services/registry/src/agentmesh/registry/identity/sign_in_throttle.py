"""Throttling failed sign-ins so that guessing is slow but nobody can lock anyone else out.

Failures are counted under two keys at once:

- an account *from one client address* (the e-mail with the address the gateway saw): after a few
  failures that pair is locked for a while, doubling. The account's owner signing in from another
  address is not affected, so a guesser cannot lock the owner out;
- a client address *across accounts*: after more failures than one person mistyping makes, the
  address is locked for every account, so spraying many accounts from one address is refused.

Unknown e-mails are counted exactly as known ones (the key is the e-mail as typed, normalised), so
a lock or its absence tells nothing about which accounts exist. Keys are stored as SHA-256 digests:
the table never holds the e-mails people tried. A successful sign-in clears its account-and-address
key only: the address's count stays, so signing in to one's own account between guesses at other
accounts does not reset the spraying limit.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from agentmesh.registry.errors import LoginThrottled
from agentmesh.registry.models import LoginState
from agentmesh.registry.store import RegistryStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginThrottle:
    """When repeated failures lock a key: after `max_failures` failures, each no more than
    `window_seconds` after the previous one, for `lockout_seconds`, doubling with every further
    failure up to `max_lockout_seconds`."""

    max_failures: int = 5
    window_seconds: float = 900.0
    lockout_seconds: float = 30.0
    max_lockout_seconds: float = 900.0

    def retry_after(self, state: LoginState, now: datetime) -> int | None:
        """Whole seconds until the key may try again, or None when it may now."""
        if state.locked_until is None or state.locked_until <= now:
            return None
        return max(1, math.ceil((state.locked_until - now).total_seconds()))

    def failed(self, state: LoginState, now: datetime) -> LoginState:
        recent = state.last_failed_at is not None and (now - state.last_failed_at).total_seconds() <= (
            self.window_seconds
        )
        count = state.failed_count + 1 if recent else 1
        locked_until = state.locked_until
        if count >= self.max_failures:
            lockout = min(self.lockout_seconds * 2 ** (count - self.max_failures), self.max_lockout_seconds)
            locked_until = now + timedelta(seconds=lockout)
        return LoginState(failed_count=count, last_failed_at=now, locked_until=locked_until)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class SignInThrottle:
    """Counts failed sign-ins per account and address (`per_account`) and per address
    (`per_address`), and refuses sign-in while either key is locked."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        per_account: LoginThrottle,
        per_address: LoginThrottle,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._per_account = per_account
        self._per_address = per_address
        self._now = clock

    @staticmethod
    def _keys(email: str, address: str) -> tuple[str, str]:
        return _digest("account", email, address), _digest("address", address)

    async def check(self, email: str, address: str) -> bool:
        """Raises LoginThrottled (with the longer wait) while the account from this address, or
        the address, is locked; else whether the account has failures from this address (for
        `succeeded` to clear)."""
        account_key, address_key = self._keys(email, address)
        async with self._store.read() as tx:
            states = await tx.get_sign_in_failures([account_key, address_key])
        now = self._now()
        waits = [
            throttle.retry_after(states[key], now)
            for key, throttle in ((account_key, self._per_account), (address_key, self._per_address))
            if key in states
        ]
        wait = max((w for w in waits if w is not None), default=None)
        if wait is not None:
            raise LoginThrottled(wait)
        return account_key in states

    async def failed(self, email: str, address: str) -> None:
        account_key, address_key = self._keys(email, address)
        now = self._now()
        async with self._store.write() as tx:
            states = await tx.get_sign_in_failures([account_key, address_key])
            account = self._per_account.failed(states.get(account_key, LoginState()), now)
            by_address = self._per_address.failed(states.get(address_key, LoginState()), now)
            await tx.save_sign_in_failures(account_key, account)
            await tx.save_sign_in_failures(address_key, by_address)
            # Keys quiet for longer than either window count from zero again: forget them.
            quiet = max(self._per_account.window_seconds, self._per_address.window_seconds)
            await tx.prune_sign_in_failures(quiet_since=now - timedelta(seconds=quiet), now=now)
        if by_address.locked_until is not None and by_address.failed_count == self._per_address.max_failures:
            logger.warning("sign-in from %s locked after %d failures", address, by_address.failed_count)

    async def succeeded(self, email: str, address: str) -> None:
        account_key, _ = self._keys(email, address)
        async with self._store.write() as tx:
            await tx.clear_sign_in_failures(account_key)
