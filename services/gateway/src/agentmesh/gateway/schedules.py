"""Firing the mesh's schedules from a gateway: every gateway polls the registry for the firings
due at its time (`ClaimScheduleFirings`, which hands each due time to one gateway only), starts
each one's run through the same chat path as a client's message, as the schedule's creator, and
reports back what became of it (`RecordScheduleFiring`).

The run is an ordinary chat: leased by its executor and resumed elsewhere if that executor dies.
The overlap policy was applied by the registry when it claimed the firing; the chat's double
texting is set to match, so a message someone else sent into a `continue` schedule's session is
treated the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import grpc

from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.background import BackgroundTask
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DeadlineExceeded, DomainError, Unavailable
from agentmesh.runtime.identity import Principal, TokenCodec

logger = logging.getLogger(__name__)

# The double texting each overlap policy's run is sent with.
DOUBLE_TEXTING = {"skip": "reject", "queue": "enqueue", "cancel_previous": "interrupt"}
CLAIM_LIMIT = 20


def utc_now() -> datetime:
    return datetime.now(UTC)


class ScheduleFirer:
    """Claims due firings every `poll_seconds` and runs them. `clock` is settable (tests move
    time on rather than wait for a minute); `tick` runs one pass and returns the firings started."""

    def __init__(
        self,
        *,
        gateway: AgentGateway,
        registry: RegistryClient,
        tokens: TokenCodec,
        system_metadata: Callable[[], Metadata | None],
        poll_seconds: float,
        run_token_ttl_seconds: int,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.clock = clock
        self._gateway = gateway
        self._registry = registry
        self._tokens = tokens
        self._system_metadata = system_metadata
        self._poll_seconds = poll_seconds
        self._token_ttl_seconds = run_token_ttl_seconds
        self._loop = BackgroundTask("schedule firer", self._poll)
        self._runs: set[asyncio.Task[None]] = set()
        # Whether the last pass found the registry unreachable: an outage is told once, when it
        # starts, and again when it ends, not at every poll.
        self._registry_away = False

    def start(self) -> None:
        if self._poll_seconds > 0:
            self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        for task in list(self._runs):
            task.cancel()
        await asyncio.gather(*self._runs, return_exceptions=True)

    async def tick(self) -> list[str]:
        """One pass: claims what is due now and starts each firing's run (not waiting for them)."""
        claimed = await self._registry.claim_schedule_firings(
            self.clock(), limit=CLAIM_LIMIT, metadata=self._system_metadata()
        )
        for firing in claimed:
            task = asyncio.create_task(self._fire(firing), name=f"schedule firing {firing.firing.id}")
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
        return [firing.firing.id for firing in claimed]

    async def _poll(self) -> None:
        while True:
            await self.poll_once()
            await self._loop.pause(self._poll_seconds)

    async def poll_once(self) -> None:
        """One pass of the firer's loop: `tick`, surviving a failure (the next pass retries). A
        registry that cannot be reached is an expected outage (a restart, a network blip): a
        WARNING when it starts and an INFO when it ends; anything else is a bug, logged in full."""
        try:
            await self.tick()
        except (Unavailable, DeadlineExceeded) as error:
            if not self._registry_away:
                logger.warning("schedule firings wait: the registry cannot be reached (%s)", error)
            self._registry_away = True
            return
        except Exception:
            logger.exception("could not claim due schedule firings")
            return
        if self._registry_away:
            logger.info("the registry is reachable again: due schedule firings are claimed")
        self._registry_away = False

    async def _fire(self, claimed: internal_pb.ClaimedFiring) -> None:
        schedule, firing_id = claimed.schedule, claimed.firing.id
        creator = claimed.creator
        principal = Principal(
            user_id=creator.id,
            is_superuser=creator.is_superuser,
            email=creator.email,
            token_version=claimed.creator_token_version,
        )
        caller = Caller(principal, self._tokens.issue(principal, ttl_seconds=self._token_ttl_seconds))
        try:
            stream = await self._gateway.start_chat(
                caller,
                AgentRef(claimed.project_slug, schedule.agent),
                claimed.message,
                claimed.firing.session_id,
                double_texting=DOUBLE_TEXTING.get(schedule.overlap_policy, ""),
            )
        except DomainError as error:
            logger.warning("schedule %s: its run did not start: %s", schedule.id, error)
            await self._record(firing_id, "failed", error=str(error))
            return
        await self._record(firing_id, "running", run_id=stream.run_id)
        try:
            await stream.result_at_end()
        except DomainError as error:
            outcome = "cancelled" if error.code == grpc.StatusCode.CANCELLED else "failed"
            await self._record(firing_id, outcome, error=str(error))
            return
        await self._record(firing_id, "completed")

    async def _record(self, firing_id: str, outcome: str, *, run_id: str = "", error: str = "") -> None:
        try:
            await self._registry.record_schedule_firing(
                firing_id, outcome, run_id=run_id, error=error, metadata=self._system_metadata()
            )
        except DomainError as failure:
            logger.warning("could not record schedule firing %s as %s: %s", firing_id, outcome, failure)
