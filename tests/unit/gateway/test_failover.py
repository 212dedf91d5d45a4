"""ChatGateway's routing rules over fake executors: failover while nothing reached the caller,
push-back when every executor is busy, no retry once a run has started."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.errors import ExecutorsBusy, NoExecutor
from agentmesh.gateway.gateway import ChatGateway
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.runtime.errors import DomainError, NotFound, ResourceExhausted, Unavailable

CALLER = Caller(token="t")
AGENT = AgentRef("proj", "bot")


class FakeExecutor:
    def __init__(self, *, fail: DomainError | None = None, fail_after: int | None = None, answer: str = "ok"):
        self.fail, self.fail_after, self.answer = fail, fail_after, answer
        self.calls: list[tuple[str, ...]] = []

    async def run(self, request, *, timeout=None, metadata=None) -> AsyncIterator[run_pb2.RunEvent]:
        self.calls.append(tuple(metadata or ()))
        if self.fail is not None and self.fail_after is None:
            raise self.fail
        yield run_pb2.RunEvent(run_id="r", run_started=run_pb2.RunStarted())
        if self.fail is not None:
            raise self.fail
        yield run_pb2.RunEvent(run_id="r", run_completed=run_pb2.RunCompleted(content=self.answer))


class FakePool:
    def __init__(self, *executors: FakeExecutor) -> None:
        self.executors = {f"e{i}": executor for i, executor in enumerate(executors)}
        self.unhealthy: set[str] = set()

    def candidates(self, session_id: str):
        return list(self.executors.items())

    def mark(self, address: str, *, healthy: bool) -> None:
        (self.unhealthy.discard if healthy else self.unhealthy.add)(address)


def gateway(pool: FakePool) -> ChatGateway:
    return ChatGateway(executors=pool, max_message_bytes=100, timeout_seconds=5)  # type: ignore[arg-type]


async def test_a_busy_or_unreachable_executor_hands_the_run_to_the_next() -> None:
    busy = FakeExecutor(fail=ResourceExhausted("full", reason="EXECUTOR_BUSY"))
    down = FakeExecutor(fail=Unavailable("down"))
    pool = FakePool(busy, down, FakeExecutor(answer="from the third"))
    result = await gateway(pool).chat(CALLER, AGENT, "hi", "s1")
    assert result.content == "from the third"
    assert pool.unhealthy == {"e1"}  # unreachable: marked; busy: still healthy
    assert busy.calls == [(("authorization", "Bearer t"),)]  # the caller's token goes along


async def test_every_executor_busy_is_resource_exhausted_with_retry_after() -> None:
    busy = ResourceExhausted("full", reason="EXECUTOR_BUSY")
    with pytest.raises(ExecutorsBusy) as raised:
        await gateway(FakePool(FakeExecutor(fail=busy), FakeExecutor(fail=Unavailable("down")))).chat(
            CALLER, AGENT, "hi", "s1"
        )
    assert raised.value.metadata["retry_after_seconds"] == "1"
    with pytest.raises(NoExecutor):
        await gateway(FakePool(FakeExecutor(fail=Unavailable("down")))).chat(CALLER, AGENT, "hi", "s1")
    with pytest.raises(NoExecutor):
        await gateway(FakePool()).chat(CALLER, AGENT, "hi", "s1")


async def test_a_started_run_or_a_real_error_is_not_retried() -> None:
    second = FakeExecutor()
    with pytest.raises(Unavailable):
        await gateway(FakePool(FakeExecutor(fail=Unavailable("died"), fail_after=1), second)).chat(
            CALLER, AGENT, "hi", "s1"
        )
    with pytest.raises(NotFound):
        await gateway(FakePool(FakeExecutor(fail=NotFound("no agent")), second)).chat(
            CALLER, AGENT, "hi", "s1"
        )
    assert second.calls == []


async def test_messages_and_session_ids_are_checked_first() -> None:
    chat = gateway(FakePool(FakeExecutor()))
    with pytest.raises(DomainError, match="message"):
        await chat.chat(CALLER, AGENT, "", "s1")
    with pytest.raises(DomainError, match=r"larger than 100"):
        await chat.chat(CALLER, AGENT, "x" * 101, "s1")
    with pytest.raises(DomainError, match="session_id"):
        chat.session_id("has space")
    assert chat.session_id("abc-1") == "abc-1"
    assert len(chat.session_id(None)) == 32
