"""A step is recorded in as few appends as durability allows: its `tool_call`s and
the `delegation_request`s it sends are one append (a death after it leaves the whole step in the
log for the run's taker), and its parallel tool results share appends — the first result goes at
once, those that finish while it is in flight go together in the next one.

Events of one append share their `created_at` (the memory service stamps an append once), which
is how these tests count appends through memory's public API. The coordinator's appends are its
own (a session's appends are never grouped with each other by memory's group commit)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.integration.executor.support import Stack, event_type, final

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIME = {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
STEP = {
    "content": "",
    "tool_calls": [TIME, TIME, TIME, {"name": "delegate", "arguments": {"agent": "worker", "task": "help"}}],
}


async def test_a_steps_calls_and_delegations_are_one_append_and_its_results_share_appends(
    stack: Stack,
) -> None:
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["Helped."])
    coordinator = await stack.agent(
        project,
        "coordinator",
        tools=["get_current_time"],
        network_access=["worker"],
        mock_responses=[STEP, "All done."],
    )

    events = await stack.chat(coordinator, "go")
    assert final(events).run_completed.content == "All done."

    stored = await stack.events(events[-1].session_id, agent="coordinator")
    appends = Counter(e.created_at.ToDatetime() for e in stored)
    by_type: dict[str, list] = {}
    for e in stored:
        by_type.setdefault(event_type(e), []).append(e)

    intents = by_type["tool_call"] + by_type["delegation_request"]
    assert len(intents) == 4
    assert len({e.created_at.ToDatetime() for e in intents}) == 1, "the step's intents are one append"
    assert appends[intents[0].created_at.ToDatetime()] == 4  # and nothing else is in it
    assert [json.loads(e.content)["agent"] for e in by_type["delegation_request"]] == ["worker"]
    assert sorted(int(e.metadata["index"]) for e in intents) == [0, 1, 2, 3]

    results = by_type["tool_result"]
    assert len(results) == 3
    # get_current_time answers without yielding: the first result's append is in flight when
    # the other two are ready, so they go together next (rather than three appends, one each).
    assert sorted(Counter(e.created_at.ToDatetime() for e in results).values()) == [1, 2]
    assert {e.parent_event_id for e in results} == {e.id for e in by_type["tool_call"]}
    # The input, the intents, two result appends, the delegation's response, the answer: six
    # appends, where there were eight before (the tool calls, then the request on its own, then
    # one append per result).
    assert len(appends) == 6
    assert [event_type(e) for e in by_type["delegation_response"]] == ["delegation_response"]
