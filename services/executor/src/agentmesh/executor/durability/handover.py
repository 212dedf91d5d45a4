"""Whether this executor hands its runs over: a graceful drain past its grace stops them without
an end, for other executors to resume from the log (docs/durability.md)."""

from __future__ import annotations


class Handover:
    """Started once, by the runner that stops its runs; read by what must then leave a run's
    ending to its taker (an open delegation gets no response here: the resumed run answers it)."""

    def __init__(self) -> None:
        self.started = False

    def start(self) -> None:
        self.started = True

    def is_started(self) -> bool:
        return self.started
