"""AgentGateway's chat rules over a RunRouter of fake executors: what a caller is told when no
executor takes the run, and which messages and session ids are refused before anything runs."""

from __future__ import annotations

import pytest

from agentmesh.executor.client import EXECUTOR_BUSY
from agentmesh.gateway.errors import ExecutorsBusy, NoExecutor
from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.runtime.errors import DomainError, ResourceExhausted
from tests.unit.executor.fake_executors import FakeExecutor, Serve, router, serve, unreachable

__all__ = ["serve"]  # the fixture

CALLER = Caller(token="t")
AGENT = AgentRef("proj", "bot")


def gateway(*addresses: str) -> AgentGateway:
    return AgentGateway(
        router=router(*addresses),
        registry=None,  # type: ignore[arg-type]
        memory=None,  # type: ignore[arg-type]
        max_message_bytes=100,
        timeout_seconds=5,
    )


async def test_a_chat_answers_with_the_addressed_agents_answer(serve: Serve) -> None:
    executor = FakeExecutor(answer="hello")
    result = await gateway((await serve(executor)).address).chat(CALLER, AGENT, "hi", "s1")
    assert (result.content, result.run_id, result.session_id) == ("hello", "r", "s1")
    assert executor.tokens == ["Bearer t"]


async def test_every_executor_busy_is_resource_exhausted_with_retry_after(serve: Serve) -> None:
    busy = await serve(FakeExecutor(fail=ResourceExhausted("full", reason=EXECUTOR_BUSY)))
    down = await unreachable(serve)
    with pytest.raises(ExecutorsBusy) as raised:
        await gateway(busy.address, down).chat(CALLER, AGENT, "hi", "s1")
    assert raised.value.metadata["retry_after_seconds"] == "1"
    with pytest.raises(NoExecutor, match="no executor could take the run"):
        await gateway(down).chat(CALLER, AGENT, "hi", "s1")
    with pytest.raises(NoExecutor):
        await gateway().chat(CALLER, AGENT, "hi", "s1")


async def test_messages_and_session_ids_are_checked_first() -> None:
    chat = gateway()
    with pytest.raises(DomainError, match="message"):
        await chat.chat(CALLER, AGENT, "", "s1")
    with pytest.raises(DomainError, match=r"larger than 100"):
        await chat.chat(CALLER, AGENT, "x" * 101, "s1")
    with pytest.raises(DomainError, match="session_id"):
        chat.session_id("has space")
    assert chat.session_id("abc-1") == "abc-1"
    assert len(chat.session_id(None)) == 32
