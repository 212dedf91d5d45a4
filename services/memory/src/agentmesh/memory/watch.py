"""Wake-ups for session watchers when new events are committed in this process.

A watcher takes the session's signal *before* it queries for new events and waits on it after:
an append that commits in between sets the signal, so no wake-up is lost. The signal only says
"look again"; what to send is always re-read from the store (`seq > last sent`), so a spurious or
merged wake-up can neither skip nor repeat an event. Appends made by other processes (other
replicas on the same PostgreSQL) are seen by the watchers' periodic poll.
"""

from __future__ import annotations

import asyncio
import weakref

# A session: its project and its id.
SessionKey = tuple[str, str]


class SessionSignals:
    """One wake-up signal per watched session, replaced each time it fires."""

    def __init__(self) -> None:
        # Weak values: a session nobody watches any more holds no memory here.
        self._signals: weakref.WeakValueDictionary[SessionKey, asyncio.Event] = weakref.WeakValueDictionary()
        self._closing = asyncio.Event()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def signal(self, session: SessionKey) -> asyncio.Event:
        """The event the next commit to `session` (or closing) will set."""
        signal = self._signals.get(session)
        if signal is None:
            signal = asyncio.Event()
            if self._closing.is_set():
                signal.set()
            self._signals[session] = signal
        return signal

    def notify(self, session: SessionKey) -> None:
        """Called after a commit to `session`: wakes its watchers."""
        signal = self._signals.pop(session, None)
        if signal is not None:
            signal.set()

    def notify_project(self, project_id: str) -> None:
        """Called after the project's sessions were erased: wakes every watcher of one of them."""
        for session in [key for key in list(self._signals.keys()) if key[0] == project_id]:
            self.notify(session)

    def close(self) -> None:
        """Wakes every watcher for good (the service is stopping)."""
        self._closing.set()
        for signal in list(self._signals.values()):
            signal.set()
        self._signals.clear()

    async def wait(self, signal: asyncio.Event, timeout_seconds: float) -> None:
        """Returns when the signal fires or after the timeout, whichever comes first."""
        try:
            async with asyncio.timeout(timeout_seconds):
                await signal.wait()
        except TimeoutError:
            pass
