"""`agentmesh trace SESSION_ID`: a two-level delegation session, appended to a real memory service
with the links the executor records, printed as a tree — runs below the delegation requests that
started them, tool results and delegation responses below their requests, with timings."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.console import Console

from agentmesh.cli.trace import events_from_memory, session_tree
from agentmesh.memory.app import start
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.settings import MemorySettings
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel, system_token
from tests.mesh import JWT_SECRET

EventType = resources_pb2.EventType
PROJECT = "p-trace"


@pytest.fixture
async def memory_service(tmp_path: Path) -> AsyncIterator[RunningService]:
    service = await start(
        MemorySettings(
            database_url=f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}",
            jwt_secret=JWT_SECRET,
            host="127.0.0.1",
            port=0,
        )
    )
    yield service
    await service.stop(0)


class SessionWriter:
    """Appends events the way the executor's recorder links them."""

    def __init__(self, memory: MemoryClient, session_id: str) -> None:
        self.memory = memory
        self.session_id = session_id

    async def append(
        self,
        agent: str,
        run_id: str,
        event_type: EventType.ValueType,
        content: str,
        *,
        parent: resources_pb2.Event | None = None,
        delegation_id: str = "",
        metadata: dict | None = None,
    ) -> resources_pb2.Event:
        new = memory_service_pb2.NewEvent(
            agent=agent,
            event_type=event_type,
            content=content,
            run_id=run_id,
            parent_event_id=parent.id if parent else "",
            delegation_id=delegation_id,
        )
        if metadata:
            new.metadata.update(metadata)
        response = await self.memory.append_events(self.session_id, PROJECT, [new])
        await asyncio.sleep(0.002)  # distinct timestamps, so timings are not all zero
        return response.events[0]


async def _two_level_delegation(memory: MemoryClient, session_id: str) -> None:
    """coordinator (a tool call, then delegates to worker) → worker (delegates to helper) → helper."""
    w = SessionWriter(memory, session_id)
    coordinator, worker, helper = "run-coordinator", "run-worker", "run-helper"
    to_worker, to_helper = "d-" + uuid.uuid4().hex[:8], "d-" + uuid.uuid4().hex[:8]

    asked = await w.append("coordinator", coordinator, EventType.EVENT_TYPE_USER_MESSAGE, "Plan the release")
    call = await w.append(
        "coordinator",
        coordinator,
        EventType.EVENT_TYPE_TOOL_CALL,
        '{"name": "lookup", "arguments": {"q": "release date"}}',
        parent=asked,
        metadata={"step": 1},
    )
    await w.append(
        "coordinator",
        coordinator,
        EventType.EVENT_TYPE_TOOL_RESULT,
        "Friday",
        parent=call,
        metadata={"step": 1},
    )
    request = await w.append(
        "coordinator",
        coordinator,
        EventType.EVENT_TYPE_DELEGATION_REQUEST,
        '{"agent": "worker", "task": "Process task 42"}',
        parent=asked,
        delegation_id=to_worker,
        metadata={"step": 2, "target_agent": "worker", "depth": 1},
    )
    received = await w.append(
        "worker",
        worker,
        EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED,
        "Process task 42",
        parent=request,
        delegation_id=to_worker,
    )
    sub_request = await w.append(
        "worker",
        worker,
        EventType.EVENT_TYPE_DELEGATION_REQUEST,
        '{"agent": "helper", "task": "Check item 7"}',
        parent=received,
        delegation_id=to_helper,
    )
    helper_received = await w.append(
        "helper",
        helper,
        EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED,
        "Check item 7",
        parent=sub_request,
        delegation_id=to_helper,
    )
    await w.append(
        "helper",
        helper,
        EventType.EVENT_TYPE_AGENT_RESPONSE,
        "item 7 is fine",
        parent=helper_received,
        delegation_id=to_helper,
    )
    await w.append(
        "worker",
        worker,
        EventType.EVENT_TYPE_DELEGATION_RESPONSE,
        '{"agent": "helper", "outcome": "completed", "content": "item 7 is fine"}',
        parent=sub_request,
        delegation_id=to_helper,
    )
    await w.append(
        "worker",
        worker,
        EventType.EVENT_TYPE_AGENT_RESPONSE,
        "task 42 done",
        parent=received,
        delegation_id=to_worker,
    )
    await w.append(
        "coordinator",
        coordinator,
        EventType.EVENT_TYPE_DELEGATION_RESPONSE,
        '{"agent": "worker", "outcome": "completed", "content": "task 42 done"}',
        parent=request,
        delegation_id=to_worker,
        metadata={"step": 2},
    )
    await w.append(
        "coordinator",
        coordinator,
        EventType.EVENT_TYPE_AGENT_RESPONSE,
        "Release planned for Friday",
        parent=asked,
    )


def _render(session_id: str, events) -> list[str]:
    console = Console(record=True, width=200, color_system=None)
    console.print(session_tree(session_id, events))
    return console.export_text().splitlines()


def _line(lines: list[str], *parts: str) -> int:
    matches = [i for i, line in enumerate(lines) if all(part in line for part in parts)]
    assert len(matches) == 1, (parts, "\n".join(lines))
    return matches[0]


def _depth(line: str) -> int:
    """How deep a tree line is: where its text starts after the guide characters."""
    return len(line) - len(line.lstrip(" │├└─┣┗━┃"))


async def test_a_two_level_delegation_is_a_tree_of_runs_with_timings(memory_service) -> None:
    session_id = "s-" + uuid.uuid4().hex
    async with authorized_channel(memory_service.address) as channel:
        await _two_level_delegation(MemoryClient(channel), session_id)

    events = await events_from_memory(
        session_id, memory_service.address, token=system_token(), jwt_secret=JWT_SECRET
    )
    lines = _render(session_id, events)

    header = lines[0]
    assert f"session {session_id}" in header
    assert "12 events" in header and "3 runs" in header and "agents coordinator, helper, worker" in header
    coordinator = _line(lines, "coordinator run run-coordina")
    step_1, step_2 = _line(lines, "step 1"), _line(lines, "step 2")
    tool_call = _line(lines, "tool_call", "lookup(")
    tool_result = _line(lines, "tool_result", "took", "Friday")
    to_worker = _line(lines, "delegation_request", "→ worker: Process task 42")
    worker = _line(lines, "worker run run-worker")
    to_helper = _line(lines, "delegation_request", "→ helper: Check item 7")
    helper = _line(lines, "helper run run-helper")
    helper_answer = _line(lines, "agent_response", "item 7 is fine")
    helper_back = _line(lines, "delegation_response", "← helper [completed]")
    worker_back = _line(lines, "delegation_response", "← worker [completed]")
    final = _line(lines, "agent_response", "Release planned for Friday")

    assert coordinator < step_1 < tool_call < tool_result < step_2 < to_worker < worker < to_helper < helper
    assert helper < helper_answer < helper_back < worker_back < final
    depth = {i: _depth(lines[i]) for i in range(len(lines))}
    assert depth[step_1] > depth[coordinator]
    assert depth[tool_call] > depth[step_1] and depth[tool_result] > depth[tool_call]
    assert depth[worker] > depth[to_worker] > depth[step_2]
    assert depth[to_helper] > depth[worker]
    assert depth[helper] > depth[to_helper] and depth[helper_answer] > depth[helper]
    assert depth[helper_back] == depth[helper], "the response hangs below its request, beside the run"
    assert depth[worker_back] == depth[worker]
    assert depth[final] == depth[step_1], "after the steps, at the run's level"
    for index in (coordinator, worker, helper):
        assert " ms · " in lines[index] or " s · " in lines[index], lines[index]


def _event(seq: int, agent: str, event_type: str, content: str, run_id: str, **links) -> dict:
    return {"id": f"e{seq}", "seq": seq, "agent": agent, "event_type": event_type, "content": content,
            "run_id": run_id, **links}  # fmt: skip


def test_runs_linked_by_delegation_id_only_still_nest_and_an_empty_session_says_so() -> None:
    events = [
        _event(1, "boss", "user_message", "go", "r1"),
        _event(
            2, "boss", "delegation_request", '{"agent": "aide", "task": "fetch"}', "r1", delegation_id="d1"
        ),
        _event(3, "aide", "task_delegation_received", "fetch", "r2", delegation_id="d1"),
        _event(
            4, "aide", "error", "no network", "r2", delegation_id="d1", metadata={"reason": "TOOL_FAILED"}
        ),
    ]

    lines = _render("s-1", events)

    request, aide, error = (
        _line(lines, "→ aide: fetch"),
        _line(lines, "aide run r2"),
        _line(lines, "TOOL_FAILED: no network"),
    )
    assert _depth(lines[aide]) > _depth(lines[request]) and _depth(lines[error]) > _depth(lines[aide])
    assert "no events" in _render("s-empty", [])[0]


async def test_the_command_prints_the_tree_and_fails_clearly_without_memory(memory_service) -> None:
    session_id = "s-" + uuid.uuid4().hex
    async with authorized_channel(memory_service.address) as channel:
        await _two_level_delegation(MemoryClient(channel), session_id)

    ok = await _agentmesh(
        "trace",
        session_id,
        "--memory",
        memory_service.address,
        "--jwt-secret",
        JWT_SECRET,
        "--token",
        system_token(),
        "--width",
        "200",
    )
    unreachable = await _agentmesh("trace", session_id, "--memory", "127.0.0.1:1")

    code, out, _ = ok
    assert code == 0
    assert f"session {session_id}" in out and "helper run run-helper" in out
    code, _, err = unreachable
    assert code == 1
    assert "agentmesh trace: memory service at 127.0.0.1:1" in err


async def _agentmesh(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentmesh.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()
