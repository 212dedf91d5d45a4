"""What an OpenAI client's request adds to a run's input — the conversation a client that keeps
no session sends, and the shape its answer must have — is recorded with the input, so the run
resumed from the log on another executor goes on with both."""

from __future__ import annotations

import json

import pytest

from agentmesh.executor.durability.client_context import CONTEXT_KEY, FORMAT_KEY
from tests.integration.executor.resume_support import (  # noqa: F401 (module fixtures)
    DeadRun,
    executor_settings,
    final,
    registry_settings,
)
from tests.integration.executor.support import EventType, Stack

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

CONTEXT = [
    {"role": "system", "content": "Answer in French."},
    {"role": "user", "content": "My name is Ada."},
    {"role": "assistant", "content": "Bonjour Ada."},
]


async def test_a_resumed_run_goes_on_with_the_clients_conversation(stack: Stack) -> None:
    agent = await stack.agent(await stack.project(), "echo", mock_responses=[{"echo_prompt": True}])
    run = DeadRun(stack, agent)
    await run.record(
        run.event(EventType.EVENT_TYPE_USER_MESSAGE, "What is my name?", **{CONTEXT_KEY: CONTEXT})
    )
    await run.orphan()
    events = await run.ended()

    (answer,) = [
        e for e in events if e.run_id == run.run_id and e.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE
    ]
    assert answer.content == (
        "system: Answer in French.\nuser: My name is Ada.\nassistant: Bonjour Ada.\nuser: What is my name?"
    )


async def test_a_resumed_run_is_held_to_the_answers_format(stack: Stack) -> None:
    agent = await stack.agent(await stack.project(), "prose", mock_responses=["Lisbon, for three nights."])
    run = DeadRun(stack, agent)
    schema = {"type": "object", "required": ["city"]}
    answer_format = {"type": "json_schema", "name": "trip", "schema_json": json.dumps(schema)}
    await run.record(
        run.event(EventType.EVENT_TYPE_USER_MESSAGE, "Plan my trip.", **{FORMAT_KEY: answer_format})
    )
    await run.orphan()
    events = await run.ended()

    (end,) = [e for e in events if e.run_id == run.run_id and final(e)]
    assert end.event_type == EventType.EVENT_TYPE_ERROR
    assert end.metadata["reason"] == "ANSWER_NOT_IN_FORMAT"
