"""A delegated run reads its history in the call that records its input
(AppendEventsRequest.list_after_append: one ListEvents round trip less per delegation level): a
worker delegated to for the first time in a session starts from nothing, and one that ran there
before starts from its own earlier tasks and answers — what the model is sent is the proof."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.integration.executor.openai_server import FakeOpenAI, Reply
from tests.integration.executor.support import Stack, delegate, final

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {"openai_base_url": openai_server.base_url, "openai_api_key": "sk-history-test-" + "h" * 30}


async def test_a_worker_starts_from_nothing_then_from_its_own_history_in_the_session(
    stack: Stack, openai_server: FakeOpenAI
) -> None:
    model = f"worker-{uuid.uuid4().hex[:8]}"
    openai_server.script(model, Reply(text="First help."), Reply(text="Second help."))
    project = await stack.project()
    await stack.agent(project, "worker", model=f"openai/{model}")
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[delegate("worker", "help me"), "Thanks."],
    )

    first = await stack.chat(coordinator, "start")
    assert final(first).run_completed.content == "Thanks."
    sent = openai_server.for_model(model)[-1].body["messages"]
    # The session had the coordinator's events already; the worker had none there.
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "help me")]

    second = await stack.chat(coordinator, "again", session_id=first[-1].session_id)
    assert final(second).run_completed.content == "Thanks."
    sent = openai_server.for_model(model)[-1].body["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "help me"),
        ("assistant", "First help."),
        ("user", "help me"),
    ]
