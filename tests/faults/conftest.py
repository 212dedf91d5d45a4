"""Fixtures of the fault tests: the mesh as processes (processes.py)."""

from tests.faults.processes import processes

__all__ = ["processes"]
