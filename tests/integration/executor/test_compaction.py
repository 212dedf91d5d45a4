"""A prompt built to a token budget (docs/sessions.md): a session driven past its agent's budget
compacts its older turns once into a `context_compacted` event, and later chats send the summary
instead of those turns — what the model is sent is the proof. A failed summary leaves the run on
the turns that fit, and says so in the log."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentmesh.executor.run.compaction import SUMMARIZE
from agentmesh.memory.v1.resources_pb2 import EventType
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import Stack, final, list_value

pytestmark = pytest.mark.asyncio(loop_scope="module")

# About 60 tokens a message (four characters a token): a budget of 400 holds a few turns.
FILLER = " lorem" * 40
BUDGET = 400


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {"openai_base_url": openai_server.base_url, "openai_api_key": "sk-compaction-test-" + "c" * 30}


def sent_texts(openai_server: FakeOpenAI, model: str) -> list[str]:
    return [m["content"] for m in openai_server.for_model(model)[-1].body["messages"][1:]]


async def chat_past_budget(
    stack: Stack, openai_server: FakeOpenAI, summary: Reply, *, compaction_prompt: str = ""
) -> tuple[str, str, str]:
    """Eight chats in one session with an agent whose budget holds about five of them, its
    summarizer answering `summary` (given the type's `compaction_prompt`): its model's name, its
    summarizer's and the session."""
    model, summarizer = f"chat-{uuid.uuid4().hex[:8]}", f"sum-{uuid.uuid4().hex[:8]}"
    openai_server.script(model, Reply(text="Noted."))
    openai_server.script(summarizer, summary)
    project = await stack.project()
    agent = await stack.agent(
        project,
        "assistant",
        model=f"openai/{model}",
        context_budget_tokens=BUDGET,
        compaction_model=f"openai/{summarizer}",
        compaction_prompt=compaction_prompt,
    )
    session_id = ""
    for number in range(1, 9):
        events = await stack.chat(agent, f"message {number}{FILLER}", session_id=session_id)
        assert final(events).run_completed.content == "Noted."
        session_id = events[-1].session_id
    return model, summarizer, session_id


async def test_a_session_past_its_budget_compacts_once_and_later_chats_use_the_summary(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model, summarizer, session_id = await chat_past_budget(
        stack, openai_server, Reply(text="SUMMARY: the user sent messages one to five.")
    )

    compacted = [
        e for e in await stack.events(session_id) if e.event_type == EventType.EVENT_TYPE_CONTEXT_COMPACTED
    ]
    assert len(compacted) == 1, [e.content for e in compacted]
    summary = compacted[0]
    assert summary.content == "SUMMARY: the user sent messages one to five."
    assert summary.metadata["from_seq"] == 1 and summary.metadata["to_seq"] > 1
    # The summarizer was asked once, about the oldest turns, with the built-in instructions.
    assert len(openai_server.for_model(summarizer)) == 1
    asked = openai_server.for_model(summarizer)[0].body["messages"]
    assert "message 1" in asked[-1]["content"]
    assert asked[0] == {"role": "system", "content": SUMMARIZE}

    # The last prompt: the summary, then only the turns after it, then the input — within budget.
    texts = sent_texts(openai_server, model)
    assert texts[0].endswith("SUMMARY: the user sent messages one to five.")
    assert not any(t.startswith("message 1 ") for t in texts)
    assert texts[-1].startswith("message 8")
    assert sum(len(t) for t in texts) // 4 < BUDGET


async def test_the_summarizer_is_given_the_agent_types_compaction_prompt(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    instructions = "Keep only the numbers the user sent, as a list."
    _, summarizer, _ = await chat_past_budget(
        stack, openai_server, Reply(text="1, 2, 3, 4, 5"), compaction_prompt=instructions
    )

    asked = openai_server.for_model(summarizer)[0].body["messages"]
    assert asked[0] == {"role": "system", "content": instructions}
    assert "message 1" in asked[-1]["content"]


async def test_a_failed_summary_leaves_the_run_on_a_truncated_window_and_says_so(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model, _, session_id = await chat_past_budget(stack, openai_server, Reply(status=400))

    compacted = [
        e for e in await stack.events(session_id) if e.event_type == EventType.EVENT_TYPE_CONTEXT_COMPACTED
    ]
    assert compacted and all(e.metadata["failed"] for e in compacted)
    assert "failed" in compacted[-1].content
    texts = sent_texts(openai_server, model)
    assert not any(t.startswith("message 1 ") for t in texts)
    assert texts[-1].startswith("message 8")
    assert sum(len(t) for t in texts) // 4 < BUDGET


async def test_with_the_scripted_model_the_summary_replaces_the_older_turns_in_the_prompt(
    stack: Stack,
) -> None:
    # A mock compaction model echoes what it is asked to summarize; the agent's script answers
    # "Noted." until its last chat, which echoes its prompt: the proof of what the model is sent.
    project = await stack.project()
    agent = await stack.agent(
        project, "scripted", mock_responses=["Noted."], context_budget_tokens=BUDGET, compaction_model="mock"
    )
    session_id = ""
    for number in range(1, 9):
        events = await stack.chat(agent, f"message {number}{FILLER}", session_id=session_id)
        session_id = events[-1].session_id
    compacted = [
        e for e in await stack.events(session_id) if e.event_type == EventType.EVENT_TYPE_CONTEXT_COMPACTED
    ]
    assert len(compacted) == 1 and "message 1" in compacted[0].content
    assert len(compacted[0].content) // 4 <= BUDGET // 4  # a summary leaves room for the turns

    config = resources_pb2.AgentConfig()
    config.mock_responses.CopyFrom(list_value([{"echo_prompt": True}]))
    await stack.update_config(agent, "config.mock_responses", config, moving=session_id)
    prompt = final(await stack.chat(agent, "message 9", session_id=session_id)).run_completed.content
    lines = prompt.splitlines()
    assert lines[0] == "user: Summary of the earlier conversation:"
    # The oldest turn is there once, inside the summary: not again as a turn of its own.
    assert prompt.count("message 1 ") == 1
    assert lines[-1] == "user: message 9"
    assert len(compacted) == len(
        [e for e in await stack.events(session_id) if e.event_type == EventType.EVENT_TYPE_CONTEXT_COMPACTED]
    )
