"""The agent cache (DESIGN §5, after the Hermes gateway's): an agent's built runtime — resolved
spec, model clients, tool set — kept per session, so the next message of a conversation does not
rebuild it (nor reconnect its MCP servers).

- Entries are keyed by (session, agent) and carry a signature of everything that changes the
  agent's behaviour; a different signature rebuilds.
- Bounded by an LRU cap and an idle TTL. Only the least recently used entries beyond the cap are
  evicted, and an entry that is mid-run never is: the cache may sit over its cap (with a warning,
  when it goes over and then at most every `OVER_CAP_WARNING_SECONDS` while it stays over) rather
  than evict a newer entry in its place, and settles back once the run has ended.
- Two requests racing for the same missing entry share one build.
- A runtime that turns `stale` (a fallback model took over one of its runs) is evicted when that
  run ends, so the next message builds afresh and tries the primary model again.
- Eviction releases softly: the runtime is dropped, but what belongs to the session (its MCP
  connections, in its `SessionScope`) stays for the session's next build. Ending a session (or the
  session staying idle past the TTL with no runtime left, at the sweep after its last runtime
  went) tears everything of it down.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

logger = logging.getLogger(__name__)

# While the cache stays over its cap, it says so again at most this often: thousands of runs in
# flight at once made one warning per new session (5,128 lines in the 5,000-stream bench).
OVER_CAP_WARNING_SECONDS = 30.0


class Releasable(Protocol):
    async def aclose(self) -> None: ...


T = TypeVar("T", bound=Releasable)
R = TypeVar("R", bound=Releasable)

CacheKey = tuple[str, str]  # (session_id, agent)


class SessionScope:
    """What a session keeps across rebuilds of its agents (MCP connections): opened once per key,
    shared by the session's agents, closed when the session ends."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._resources: dict[str, Releasable] = {}
        self._opening: dict[str, asyncio.Future[Any]] = {}
        self._late: set[asyncio.Task[None]] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._resources)

    async def get_or_open(self, key: str, opener: Callable[[], Awaitable[R]]) -> R:
        """The resource named `key`, opened by `opener` the first time (once, however many ask)."""
        if self.closed:
            raise RuntimeError(f"session {self.session_id!r} has ended")
        existing = self._resources.get(key)
        if existing is not None:
            if getattr(existing, "alive", True):
                return existing  # type: ignore[return-value]
            # It died (an MCP server that exited): open a new one.
            del self._resources[key]
            self._close_later(existing)
        pending = self._opening.get(key)
        if pending is None:
            pending = asyncio.ensure_future(opener())
            self._opening[key] = pending
            pending.add_done_callback(lambda done: self._opened(key, done))
        return await asyncio.shield(pending)

    def _opened(self, key: str, done: asyncio.Future[Any]) -> None:
        self._opening.pop(key, None)
        if done.cancelled() or done.exception() is not None:
            return
        if self.closed:  # opened after the session ended: close it straight away
            self._close_later(done.result())
        else:
            self._resources[key] = done.result()

    def _close_later(self, resource: Releasable) -> None:
        task = asyncio.ensure_future(_close_quietly(resource))
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def aclose(self) -> None:
        self.closed = True
        resources, self._resources = list(self._resources.values()), {}
        for resource in resources:
            await _close_quietly(resource)


@dataclass(eq=False)
class _Session:
    scope: SessionScope
    last_used: float
    entries: set[CacheKey] = field(default_factory=set)  # live entries
    pinned_retired: int = 0  # entries taken out of service but still mid-run
    builds: int = 0
    ending: bool = False
    closed: bool = False


@dataclass(eq=False)
class _Entry(Generic[T]):
    key: CacheKey
    signature: str
    value: T
    session: _Session
    last_used: float
    active: int = 0
    retired: bool = False


@dataclass(eq=False)
class _Build:
    signature: str
    future: asyncio.Future[Any]
    waiters: int = 0


@dataclass(frozen=True)
class CacheStats:
    size: int
    hits: int
    misses: int
    evictions: int
    sessions: int


class AgentCache(Generic[T]):
    """Built agent runtimes per (session, agent), bounded by an LRU cap and an idle TTL."""

    def __init__(
        self,
        *,
        max_entries: int,
        idle_ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.idle_ttl_seconds = idle_ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[CacheKey, _Entry[T]] = OrderedDict()  # least recently used first
        # How many of `_entries` are idle (no run in flight): `_settle` looks for idle entries to
        # evict only while there are any (it ran on every run's start and end, and with
        # thousands of runs in flight over the cap its scan took two thirds of the executor).
        self._idle = 0
        self._builds: dict[tuple[CacheKey, str], _Build] = {}
        self._sessions: dict[str, _Session] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._warned_over_cap_at: float | None = None  # while over its cap, when it last said so

    # -- use --------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def use(
        self,
        session_id: str,
        agent: str,
        signature: str,
        build: Callable[[SessionScope], Awaitable[T]],
    ) -> AsyncIterator[T]:
        """The cached runtime for this session and agent, built when missing or stale. It is
        pinned (never evicted nor closed) until the block ends."""
        entry = await self._acquire((session_id, agent), signature, build)
        try:
            yield entry.value
        finally:
            self._release(entry)

    async def _acquire(
        self, key: CacheKey, signature: str, build: Callable[[SessionScope], Awaitable[T]]
    ) -> _Entry[T]:
        session = self._session(key[0])
        session.last_used = self._clock()
        entry = self._entries.get(key)
        if entry is not None and entry.signature == signature:
            self.hits += 1
            if entry.active == 0:
                self._idle -= 1
            entry.active += 1
            entry.last_used = session.last_used
            self._entries.move_to_end(key)
            return entry
        pending = self._builds.get((key, signature))
        if pending is None:
            self.misses += 1
            pending = _Build(signature, asyncio.get_running_loop().create_future())
            self._builds[(key, signature)] = pending
            session.builds += 1
            # The build is a task of its own: a requester that gives up (is cancelled) does not
            # take the build down with it for the others waiting on it.
            self._spawn(self._build(key, pending, build, session))
        else:
            self.hits += 1  # joins the build in flight: no second build
        pending.waiters += 1
        try:
            return await asyncio.shield(pending.future)
        except asyncio.CancelledError:
            future = pending.future
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(future.result())
            else:
                pending.waiters -= 1
            raise

    async def _build(
        self,
        key: CacheKey,
        pending: _Build,
        build: Callable[[SessionScope], Awaitable[T]],
        session: _Session,
    ) -> None:
        try:
            value = await build(session.scope)
        except BaseException as error:
            self._builds.pop((key, pending.signature), None)
            session.builds -= 1
            pending.future.set_exception(error)
            pending.future.exception()  # retrieved: nobody waiting any more is not an error
            self._maybe_end(session)
            if not isinstance(error, Exception):
                raise
            return
        self._builds.pop((key, pending.signature), None)
        session.builds -= 1
        entry = _Entry(key, pending.signature, value, session, self._clock(), active=pending.waiters)
        if session.ending:
            # The session ended while this was being built: serve the waiters, then close.
            self._retire(entry)
        else:
            if key in self._entries:
                self._retire(self._take_out(key))
            self._entries[key] = entry
            self._idle += entry.active == 0
            session.entries.add(key)
        pending.future.set_result(entry)
        if not pending.waiters:
            self._release(entry, pinned=False)
        self._settle()

    def _release(self, entry: _Entry[T], *, pinned: bool = True) -> None:
        if pinned:
            entry.active -= 1
            self._idle += entry.active == 0 and self._entries.get(entry.key) is entry
        entry.last_used = entry.session.last_used = self._clock()
        if getattr(entry.value, "stale", False) and self._entries.get(entry.key) is entry:
            # The runtime asked to be rebuilt (a fallback model took over a run): the session's
            # next message builds afresh.
            self._evict(entry.key)
        if entry.active == 0 and entry.retired:
            entry.session.pinned_retired -= 1
            self._close(entry)
        self._settle()

    # -- eviction ---------------------------------------------------------------------------------

    def _settle(self) -> None:
        """Evicts the least recently used entries beyond the cap — those of them that are idle.
        One mid-run is skipped, and no newer entry is evicted in its place (that would punish the
        most recent session to protect a busy one): the cache stays over its cap until the next
        insert or release looks again."""
        over = len(self._entries) - self.max_entries
        if over <= 0:
            self._warned_over_cap_at = None
            return
        busy = over
        if self._idle:
            # The oldest `over` entries, up to the last idle one among them.
            idle, excess = self._idle, []
            for key, entry in itertools.islice(self._entries.items(), over):
                excess.append((key, entry))
                idle -= entry.active == 0
                if not idle:
                    break
            busy -= len(excess)
            for key, entry in excess:
                if entry.active == 0:
                    self._evict(key)
                else:
                    busy += 1
        if not busy:
            self._warned_over_cap_at = None
            return
        now = self._clock()
        if self._warned_over_cap_at is None or now - self._warned_over_cap_at >= OVER_CAP_WARNING_SECONDS:
            self._warned_over_cap_at = now
            logger.warning(
                "agent cache holds %d agents, %d over its cap of %d: the oldest are mid-turn "
                "(a run in flight) and stay until their runs end (said again every %d s while so)",
                len(self._entries),
                busy,
                self.max_entries,
                OVER_CAP_WARNING_SECONDS,
            )

    def _evict(self, key: CacheKey) -> None:
        self.evictions += 1
        self._retire(self._take_out(key))

    def _take_out(self, key: CacheKey) -> _Entry[T]:
        entry = self._entries.pop(key)
        self._idle -= entry.active == 0
        return entry

    def _retire(self, entry: _Entry[T]) -> None:
        """Takes an entry out of service (softly: its session's scope stays): closed now when
        idle, else when its runs end."""
        entry.session.entries.discard(entry.key)
        if entry.active:
            entry.retired = True
            entry.session.pinned_retired += 1
        else:
            self._close(entry)

    def _close(self, entry: _Entry[T]) -> None:
        self._spawn(_close_quietly(entry.value))
        self._maybe_end(entry.session)

    def sweep(self) -> int:
        """Evicts idle entries older than the TTL, and ends sessions idle that long. Returns how
        many entries it evicted."""
        now = self._clock()
        # Sessions idle that long that had no runtime left end. One whose last runtime goes in
        # this sweep keeps its connections until the next: eviction is soft, so a session coming
        # back right after finds its MCP connections as it left them.
        ending = [
            session
            for session in self._sessions.values()
            if not session.entries and now - session.last_used >= self.idle_ttl_seconds
        ]
        expired = [
            key
            for key, entry in self._entries.items()
            if entry.active == 0 and now - entry.last_used >= self.idle_ttl_seconds
        ]
        for key in expired:
            self._evict(key)
        for session in ending:
            session.ending = True
            self._maybe_end(session)
        return len(expired)

    def end_session(self, session_id: str) -> int:
        """Tears a session down fully: its entries now (those mid-run when their run ends), then
        its scope. Returns how many entries it released."""
        session = self._sessions.get(session_id)
        if session is None:
            return 0
        session.ending = True
        keys = list(session.entries)  # its entries in the cache (not every entry's key)
        for key in keys:
            self._retire(self._take_out(key))
        self._maybe_end(session)
        return len(keys)

    def _maybe_end(self, session: _Session) -> None:
        if not session.ending or session.closed:
            return
        if session.entries or session.pinned_retired or session.builds:
            return  # a run or a build of this session is still going; it ends the session after
        session.closed = True
        if self._sessions.get(session.scope.session_id) is session:
            del self._sessions[session.scope.session_id]
        self._spawn(session.scope.aclose())

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None or session.ending:
            # New, or ending (its remaining runs finish on the old scope): a fresh scope.
            session = _Session(SessionScope(session_id), self._clock())
            self._sessions[session_id] = session
        return session

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- lifecycle --------------------------------------------------------------------------------

    def keys(self) -> list[CacheKey]:
        """The cached (session, agent) pairs, least recently used first."""
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def stats(self) -> CacheStats:
        return CacheStats(
            size=len(self._entries),
            hits=self.hits,
            misses=self.misses,
            evictions=self.evictions,
            sessions=len(self._sessions),
        )

    def start_sweeper(self, interval_seconds: float) -> None:
        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(interval_seconds)
                try:
                    self.sweep()
                except Exception:
                    logger.exception("agent cache sweep failed")

        self._sweeper = asyncio.create_task(sweep_forever(), name="agent cache sweeper")

    async def drain(self) -> None:
        """Waits until every build and close started so far has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Tears everything down (at shutdown, once in-flight runs have drained)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        sessions = list(self._sessions.values())
        for session in sessions:
            self.end_session(session.scope.session_id)
        for session in sessions:
            if not session.closed:  # still pinned by a run that outlived the drain
                session.closed = True
                self._spawn(session.scope.aclose())
        await self.drain()


async def _close_quietly(resource: Releasable) -> None:
    try:
        await resource.aclose()
    except Exception:
        logger.exception("could not close %r", resource)
