"""What a session's event log must say about its runs whatever died or hung up (DESIGN §5,
durability): each run that recorded anything ends with exactly one final event, each
`delegation_request` has exactly one `delegation_response`, and `seq` has no gaps."""

from __future__ import annotations

from collections import Counter
from typing import Any


def is_final(event: dict[str, Any]) -> bool:
    """A run's final event: its answer, or the error it failed or was cancelled with (those carry
    a status `code`; an error the run recovers from does not)."""
    if event["event_type"] == "agent_response":
        return True
    return event["event_type"] == "error" and "code" in (event.get("metadata") or {})


def log_problems(events: list[dict[str, Any]]) -> list[str]:
    """Everything wrong with a session's log, as sentences (empty when it holds)."""
    problems = []
    seqs = [event["seq"] for event in events]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"seq is not gap-free from 1: {seqs}")
    finals = Counter(event["run_id"] for event in events if is_final(event))
    for run_id in {event["run_id"] for event in events if event["run_id"]}:
        if finals[run_id] != 1:
            kinds = [(e["agent"], e["event_type"]) for e in events if e["run_id"] == run_id]
            problems.append(f"run {run_id} has {finals[run_id]} final events: {kinds}")
    requests = Counter(e["delegation_id"] for e in events if e["event_type"] == "delegation_request")
    responses = Counter(e["delegation_id"] for e in events if e["event_type"] == "delegation_response")
    for delegation_id in requests.keys() | responses.keys():
        if requests[delegation_id] != 1 or responses[delegation_id] != 1:
            problems.append(
                f"delegation {delegation_id}: {requests[delegation_id]} requests, "
                f"{responses[delegation_id]} responses"
            )
    return problems
