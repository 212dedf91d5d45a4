"""The event outbox: an end the memory service did not take is appended again until it is, once;
an end another event already holds is dropped (the first stands)."""

from __future__ import annotations

from agentmesh.executor.durability.outbox import EventOutbox
from agentmesh.memory.client import IdempotencyKeyReused
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import Unavailable
from tests.polling import eventually

SYSTEM = (("authorization", "Bearer system"),)


class Memory:
    """Fails the first `unavailable` appends, refuses keys in `taken`, records the rest."""

    def __init__(self, *, unavailable: int = 0, taken: tuple[str, ...] = ()) -> None:
        self.stored: list[tuple[str, str, object]] = []
        self._unavailable = unavailable
        self._taken = taken

    async def append_events(self, session_id, project_id, events, *, metadata=None):
        if self._unavailable:
            self._unavailable -= 1
            raise Unavailable("memory restarting")
        (event,) = events
        if event.idempotency_key in self._taken:
            raise IdempotencyKeyReused(0, event.idempotency_key, "e1")
        self.stored.append((session_id, event.idempotency_key, metadata))
        return pb.AppendEventsResponse()


async def test_kept_events_are_appended_once_the_memory_service_is_back() -> None:
    memory = Memory(unavailable=3, taken=("r2:end",))
    told: list[set[str]] = []
    outbox = EventOutbox(
        memory,  # type: ignore[arg-type]
        system_metadata=lambda: SYSTEM,
        delivered=lambda: told.append(outbox.pending_run_ids()),
    )
    outbox.start()
    outbox.keep("s1", "p1", pb.NewEvent(idempotency_key="r1:end"), run=("agent", "r1"))
    outbox.keep("s1", "p1", pb.NewEvent(idempotency_key="r2:end"), run=("agent", "r2"))
    assert outbox.pending_runs() == [("agent", "r1"), ("agent", "r2")]
    assert outbox.pending_run_ids() == {"r1", "r2"}

    async def delivered() -> bool:
        return outbox.pending_runs() == []

    await eventually(delivered, what="the outbox is empty")
    assert memory.stored == [("s1", "r1:end", SYSTEM)]
    assert told == [{"r2"}, set()]  # the finisher is told as each event leaves
    await outbox.stop(0.1)


async def test_a_kept_event_goes_with_the_executors_token_of_the_moment_it_is_sent() -> None:
    # Memory may be away for longer than a token lives: the token is read when the event is
    # sent, not when it was kept.
    memory = Memory(unavailable=2)
    tokens = iter(f"Bearer system-{n}" for n in range(1000))
    outbox = EventOutbox(
        memory,  # type: ignore[arg-type]
        system_metadata=lambda: (("authorization", next(tokens)),),
        delivered=lambda: None,
    )
    outbox.keep("s1", "p1", pb.NewEvent(idempotency_key="r1:end"), run=("agent", "r1"))
    outbox.start()

    async def delivered() -> bool:
        return outbox.pending_runs() == []

    await eventually(delivered, what="the outbox is empty")
    ((_, _, metadata),) = memory.stored
    assert metadata == (("authorization", "Bearer system-2"),)  # the third try's token, not the first
    await outbox.stop(0.1)
