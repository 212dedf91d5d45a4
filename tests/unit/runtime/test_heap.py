"""A started service freezes what its startup made (runtime/heap.py), unless told not to."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from agentmesh.runtime.heap import GC_FREEZE_ENV, freeze_startup_heap


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Cycle:
    """An object that only the cycle collector frees once it refers to itself."""

    def __init__(self) -> None:
        self.me = self


def test_the_startup_heap_is_frozen_and_its_garbage_collected_first() -> None:
    kept = _Cycle()
    dropped = weakref.ref(_Cycle())  # garbage already: freed only by a collection
    # A count, not an exact one to compare later: another thread may free a frozen object meanwhile.
    assert freeze_startup_heap() > 0
    assert dropped() is None  # collected, not frozen for the life of the process
    # What startup made is out of the generations later collections scan.
    assert not any(item is kept for item in gc.get_objects())
    gc.unfreeze()
    assert any(item is kept for item in gc.get_objects())


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_the_environment_can_leave_the_collector_alone(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(GC_FREEZE_ENV, value)
    assert freeze_startup_heap() == 0
    assert gc.get_freeze_count() == 0
