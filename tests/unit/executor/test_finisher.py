"""The run finisher: runs' ends reach the registry in batches, every one of them, once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from agentmesh.executor.durability.finisher import RunFinisher
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as pb
from agentmesh.runtime.errors import Unavailable
from agentmesh.runtime.identity import current_token
from tests.polling import eventually

SYSTEM = (("authorization", "Bearer system"),)


class Registry:
    """Records FinishAgentRuns calls; fails the first `unavailable` of them."""

    def __init__(self, *, unavailable: int = 0, refuse: str = "") -> None:
        self.calls: list[tuple[list[str], object]] = []
        self._unavailable = unavailable
        self._refuse = refuse

    async def finish_agent_runs(self, runs, *, metadata=None):
        await asyncio.sleep(0.005)
        if self._unavailable:
            self._unavailable -= 1
            raise Unavailable("registry restarting")
        self.calls.append(([run.run_id for run in runs], metadata))
        return [
            pb.FinishedAgentRun(error_code="NOT_FOUND", error_message="agent not found")
            if run.agent_id == self._refuse
            else pb.FinishedAgentRun()
            for run in runs
        ]


def finisher(
    registry: Registry,
    *,
    system: bool = True,
    window: float = 0.02,
    max_batch: int = 100,
    held_back: Callable[[], set[str]] = set,
) -> RunFinisher:
    return RunFinisher(
        registry,  # type: ignore[arg-type]
        system_metadata=lambda: SYSTEM if system else None,
        window_seconds=window,
        max_batch=max_batch,
        timeout_seconds=2.0,
        held_back=held_back,
    )


def end(runs: RunFinisher, run_id: str, agent_id: str = "agent") -> None:
    runs.finish(agent_id, run_id, completed=True, tokens_used=3, cost=0.1)


async def test_ends_that_arrive_together_go_in_one_call() -> None:
    registry = Registry()
    runs = finisher(registry)
    runs.start()
    for n in range(5):
        end(runs, f"r{n}")

    async def called() -> bool:
        return bool(registry.calls)

    await eventually(called, what="the first call")
    assert registry.calls == [([f"r{n}" for n in range(5)], SYSTEM)]
    end(runs, "later")
    await runs.stop()
    assert registry.calls[-1] == (["later"], SYSTEM)


async def test_a_batch_holds_at_most_max_batch_runs() -> None:
    registry = Registry()
    runs = finisher(registry, max_batch=2)
    runs.start()
    for n in range(5):
        end(runs, f"r{n}")
    await runs.stop()
    assert [ids for ids, _ in registry.calls] == [["r0", "r1"], ["r2", "r3"], ["r4"]]
    assert runs.pending == 0


async def test_without_a_system_token_each_caller_reports_its_own_runs() -> None:
    registry = Registry()
    runs = finisher(registry, system=False)
    runs.start()
    for token, run_id in (("alice", "a1"), ("bob", "b1"), ("alice", "a2")):
        current_token.set(token)
        end(runs, run_id)
    await runs.stop()
    assert sorted(registry.calls, key=lambda call: call[0]) == [
        (["a1", "a2"], (("authorization", "Bearer alice"),)),
        (["b1"], (("authorization", "Bearer bob"),)),
    ]


async def test_an_unavailable_registry_is_tried_again() -> None:
    registry = Registry(unavailable=2)
    runs = finisher(registry, window=0)
    runs.start()
    end(runs, "r1")
    await runs.stop()
    assert registry.calls == [(["r1"], SYSTEM)]


async def test_a_refused_run_is_logged_and_the_others_count(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry(refuse="gone")
    runs = finisher(registry)
    runs.start()
    end(runs, "r1")
    end(runs, "r2", agent_id="gone")
    with caplog.at_level(logging.WARNING, logger="agentmesh.executor.durability.finisher"):
        await runs.stop()
    assert registry.calls == [(["r1", "r2"], SYSTEM)]
    assert "refused the end of run r2 of agent gone: NOT_FOUND" in caplog.text


async def test_stopping_sends_what_is_pending_at_once() -> None:
    registry = Registry()
    runs = finisher(registry, window=60.0)
    runs.start()
    end(runs, "r1")
    await asyncio.wait_for(runs.stop(), timeout=1.0)
    assert registry.calls == [(["r1"], SYSTEM)]


async def test_an_end_is_kept_until_the_registry_takes_it_however_long_it_is_away() -> None:
    # Away for longer than the finisher's timeout: the end is kept (and its run's lease with it).
    registry = Registry(unavailable=4)
    runs = RunFinisher(
        registry,  # type: ignore[arg-type]
        system_metadata=lambda: SYSTEM,
        window_seconds=0.0,
        max_batch=100,
        timeout_seconds=0.1,
    )
    runs.start()
    end(runs, "r1")
    await asyncio.sleep(0.05)
    assert runs.pending_runs() == [("agent", "r1")]

    async def delivered() -> bool:
        # Taken: the registry was called and the finisher has read its answer (it drops the end
        # from its pending runs only then).
        return bool(registry.calls) and not runs.pending_runs()

    await eventually(delivered, what="the end reached the registry")
    assert registry.calls == [(["r1"], SYSTEM)]
    assert runs.pending_runs() == []
    await runs.stop()


async def test_an_end_whose_final_event_is_not_recorded_yet_waits_for_it() -> None:
    """The registry deletes a finished run's lease: an end sent before its final event reached
    memory would leave the run with no end if this executor died then (the memory-kill test)."""
    registry = Registry()
    unrecorded = {"r1"}
    runs = finisher(registry, window=0.0, held_back=lambda: set(unrecorded))
    runs.start()
    end(runs, "r1")
    end(runs, "r2")

    async def sent(run_ids: list[str]) -> bool:
        return [run_id for ids, _ in registry.calls for run_id in ids] == run_ids

    await eventually(lambda: sent(["r2"]), what="the end whose event is recorded went")
    assert ("agent", "r1") in runs.pending_runs()  # its lease is still renewed
    unrecorded.clear()
    runs.wake()
    await eventually(lambda: sent(["r2", "r1"]), what="the held end went once its event was recorded")
    await runs.stop()


async def test_ends_still_held_back_at_shutdown_are_left_to_their_leases() -> None:
    registry = Registry()
    runs = finisher(registry, window=0.0, held_back=lambda: {"r1"})
    runs.start()
    end(runs, "r1")
    await asyncio.wait_for(runs.stop(), timeout=5.0)
    assert registry.calls == []
    assert runs.pending_runs() == []


async def test_an_end_a_session_turn_waits_on_goes_without_the_window_and_says_when_taken() -> None:
    registry = Registry()
    runs = finisher(registry, window=600)  # only an urgent end could go before the test times out
    runs.start()
    end(runs, "batched")
    taken = runs.finish("agent", "turn", completed=True, tokens_used=1, cost=0.0, urgent=True)
    await asyncio.wait_for(taken, timeout=60)
    # Taken means the registry answered for it; what was waiting went along in the same call.
    assert registry.calls == [(["batched", "turn"], SYSTEM)]
    await runs.stop()


async def test_a_held_back_turn_end_is_taken_only_once_its_final_event_is_recorded() -> None:
    registry = Registry()
    held = {"turn"}
    runs = finisher(registry, window=600, held_back=lambda: held)
    runs.start()
    taken = runs.finish("agent", "turn", completed=True, tokens_used=1, cost=0.0, urgent=True)
    await asyncio.sleep(0.05)
    assert not taken.done() and registry.calls == []
    held.clear()
    runs.wake()
    await asyncio.wait_for(taken, timeout=60)
    assert registry.calls == [(["turn"], SYSTEM)]
    await runs.stop()


async def test_a_forgotten_turn_end_stops_being_waited_for() -> None:
    runs = finisher(Registry(), window=600, held_back=lambda: {"turn"})
    runs.start()
    taken = runs.finish("agent", "turn", completed=True, tokens_used=1, cost=0.0, urgent=True)
    runs.forget("turn")
    await asyncio.wait_for(taken, timeout=60)
    await runs.stop()
