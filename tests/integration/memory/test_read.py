"""ListEvents, GetSession and ListSessions over a real server, on SQLite and PostgreSQL: filters,
keyset paging with tokens bound to their filters, and bad input."""

from __future__ import annotations

import base64
import json

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1.resources_pb2 import RunState
from agentmesh.runtime.errors import InvalidArgument, NotFound, OutOfRange
from tests.integration.memory.builders import EventType, new_event

USER = EventType.EVENT_TYPE_USER_MESSAGE
ANSWER = EventType.EVENT_TYPE_AGENT_RESPONSE
TOOL = EventType.EVENT_TYPE_TOOL_CALL


async def pages(memory: MemoryClient, request: pb.ListEventsRequest) -> list[list[int]]:
    """The seqs of every page the request yields, following next_page_token to the end."""
    seen = []
    while True:
        response = await memory.list_events(request)
        seen.append([event.seq for event in response.events])
        if not response.next_page_token:
            return seen
        request.page_token = response.next_page_token


@pytest.fixture
async def conversation(memory: MemoryClient) -> None:
    """Session "s-1" of project "p-1": 30 events, coordinator and worker alternating (odd seqs
    coordinator), each third one a tool call, runs r-1 (seq 1..15) and r-2 (16..30)."""
    events = [
        new_event(
            f"event {seq}",
            agent="coordinator" if seq % 2 else "worker",
            event_type=TOOL if seq % 3 == 0 else (USER if seq % 2 else ANSWER),
            run_id="r-1" if seq <= 15 else "r-2",
        )
        for seq in range(1, 31)
    ]
    await memory.append_events("s-1", "p-1", events)


async def test_a_session_pages_in_seq_order_with_total(memory: MemoryClient, conversation: None) -> None:
    request = pb.ListEventsRequest(session_id="s-1", page_size=7, include_total_size=True)
    first = await memory.list_events(request)
    assert first.total_size == 30
    assert await pages(memory, request) == [list(range(n, min(n + 7, 31))) for n in range(1, 31, 7)]


async def test_total_size_is_only_counted_when_asked(memory: MemoryClient, conversation: None) -> None:
    response = await memory.list_events(pb.ListEventsRequest(session_id="s-1", agent="worker"))
    assert response.total_size == 0
    response = await memory.list_events(
        pb.ListEventsRequest(session_id="s-1", agent="worker", include_total_size=True)
    )
    assert response.total_size == 15


async def test_filters_combine(memory: MemoryClient, conversation: None) -> None:
    async def seqs(**filters) -> list[int]:
        request = pb.ListEventsRequest(session_id="s-1", page_size=4, include_total_size=True, **filters)
        found = [seq for page in await pages(memory, request) for seq in page]
        assert (await memory.list_events(request)).total_size == len(found)
        return found

    assert await seqs(agent="worker") == list(range(2, 31, 2))
    assert await seqs(event_types=[TOOL]) == list(range(3, 31, 3))
    assert await seqs(event_types=[USER, TOOL]) == [s for s in range(1, 31) if s % 3 == 0 or s % 2]
    assert await seqs(run_id="r-2") == list(range(16, 31))
    assert await seqs(after_seq=25) == [26, 27, 28, 29, 30]
    assert await seqs(agent="coordinator", run_id="r-2", after_seq=20, event_types=[USER]) == [23, 25, 29]
    assert await seqs(agent="nobody") == []


async def test_descending_reads_the_last_window_of_an_agent(memory: MemoryClient, conversation: None) -> None:
    request = pb.ListEventsRequest(session_id="s-1", agent="worker", descending=True, page_size=3)
    response = await memory.list_events(request)
    assert [event.seq for event in response.events] == [30, 28, 26]
    assert await pages(memory, request) == [[30, 28, 26], [24, 22, 20], [18, 16, 14], [12, 10, 8], [6, 4, 2]]
    request = pb.ListEventsRequest(session_id="s-1", descending=True, after_seq=26, page_size=3)
    assert await pages(memory, request) == [[30, 29, 28], [27]]


async def test_an_agents_events_across_the_projects_sessions(memory: MemoryClient) -> None:
    for session in ("a", "b", "c"):
        await memory.append_events(session, "p-1", [new_event(f"{session}1", agent="worker"), new_event("x")])
        await memory.append_events(session, "p-1", [new_event(f"{session}2", agent="worker")])
    await memory.append_events("other", "p-2", [new_event("elsewhere", agent="worker")])

    request = pb.ListEventsRequest(project_id="p-1", agent="worker", page_size=2, include_total_size=True)
    contents = []
    while True:
        response = await memory.list_events(request)
        assert response.total_size == 6
        contents += [event.content for event in response.events]
        if not response.next_page_token:
            break
        request.page_token = response.next_page_token
    assert contents == ["a1", "a2", "b1", "b2", "c1", "c2"]

    newest = await memory.list_events(
        pb.ListEventsRequest(project_id="p-1", agent="worker", descending=True, page_size=4)
    )
    assert [event.content for event in newest.events] == ["c2", "c1", "b2", "b1"]
    one_session = await memory.list_events(
        pb.ListEventsRequest(project_id="p-1", agent="worker", session_id="b")
    )
    assert [event.content for event in one_session.events] == ["b1", "b2"]


async def test_run_filters_apply_before_paging_and_counting(memory: MemoryClient) -> None:
    """A run's state is its final event's (the one keyed `<run_id>:end`); its activity, its
    latest event's time."""
    for n in range(1, 6):
        run = f"r-{n}"
        await memory.append_events("s-1", "p-1", [new_event(run, agent="worker", run_id=run)])
        if n % 2:
            answer = new_event("done", event_type=ANSWER, run_id=run, idempotency_key=f"{run}:end")
            await memory.append_events("s-1", "p-1", [answer])
    answered = pb.ListEventsRequest(
        project_id="p-1",
        agent="worker",
        event_types=[USER],
        run_states=[RunState.RUN_STATE_ANSWERED],
        page_size=2,
        include_total_size=True,
    )
    first = await memory.list_events(answered)
    assert [e.content for e in first.events] == ["r-1", "r-3"] and first.total_size == 3
    answered.page_token = first.next_page_token
    assert [e.content for e in (await memory.list_events(answered)).events] == ["r-5"]

    running = pb.ListEventsRequest(
        project_id="p-1", agent="worker", event_types=[USER], run_states=[RunState.RUN_STATE_RUNNING]
    )
    assert [e.content for e in (await memory.list_events(running)).events] == ["r-2", "r-4"]
    # A page token stays bound to its filters, these too.
    with pytest.raises(InvalidArgument):
        await memory.list_events(
            pb.ListEventsRequest(project_id="p-1", agent="worker", page_token=first.next_page_token)
        )

    session = await memory.get_session("s-1", project_id="p-1")
    since = pb.ListEventsRequest(project_id="p-1", agent="worker", event_types=[USER])
    since.run_active_since.CopyFrom(session.updated_at)
    latest = (await memory.list_events(since)).events
    assert [e.content for e in latest] == ["r-5"]  # the run whose answer was recorded last


async def test_a_page_token_is_bound_to_its_filters(memory: MemoryClient, conversation: None) -> None:
    first = await memory.list_events(pb.ListEventsRequest(session_id="s-1", agent="worker", page_size=2))
    token = first.next_page_token
    assert token

    for changed in (
        pb.ListEventsRequest(session_id="s-1", agent="coordinator", page_token=token),
        pb.ListEventsRequest(session_id="s-1", page_token=token),
        pb.ListEventsRequest(session_id="s-1", agent="worker", descending=True, page_token=token),
        pb.ListEventsRequest(session_id="s-1", agent="worker", event_types=[TOOL], page_token=token),
        pb.ListEventsRequest(session_id="s-2", agent="worker", page_token=token),
    ):
        with pytest.raises(InvalidArgument) as caught:
            await memory.list_events(changed)
        assert caught.value.reason == "INVALID_PAGE_TOKEN"
        assert [v.field for v in caught.value.violations] == ["page_token"]

    # The same filters with another page size go on where the token left off.
    request = pb.ListEventsRequest(session_id="s-1", agent="worker", page_size=3, page_token=token)
    assert [event.seq for event in (await memory.list_events(request)).events] == [6, 8, 10]


@pytest.mark.parametrize(
    "token",
    [
        "not a token",
        "bm90IGpzb24",  # base64 of "not json"
        base64.urlsafe_b64encode(json.dumps({"v": 1, "q": "x", "c": ["seven"]}).encode()).decode(),
        base64.urlsafe_b64encode(b"7").decode(),  # what a base64-id token would be
        "A" * 5000,
    ],
    ids=["garbage", "not-json", "forged", "bare-id", "huge"],
)
async def test_malformed_page_tokens_are_invalid_argument(
    memory: MemoryClient, conversation: None, token: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await memory.list_events(pb.ListEventsRequest(session_id="s-1", page_token=token))
    assert caught.value.reason == "INVALID_PAGE_TOKEN"
    with pytest.raises(InvalidArgument):
        await memory.list_sessions("p-1", page_token=token)


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.ListEventsRequest(), ["project_id", "agent"]),
        (pb.ListEventsRequest(project_id="p-1"), ["agent"]),
        (pb.ListEventsRequest(project_id="p-1", agent="a", after_seq=3), ["after_seq"]),
        (pb.ListEventsRequest(session_id="s-1", after_seq=-1), ["after_seq"]),
        (pb.ListEventsRequest(session_id="s-1", page_size=-5), ["page_size"]),
        (pb.ListEventsRequest(session_id="s-1", event_types=[USER, 0]), ["event_types[1]"]),
        (pb.ListEventsRequest(session_id="s-1", run_states=[0]), ["run_states[0]"]),
    ],
    ids=[
        "nothing",
        "no-agent",
        "after-seq-across-sessions",
        "negative-after",
        "negative-size",
        "unspecified",
        "unspecified-run-state",
    ],
)
async def test_malformed_filters_are_invalid_argument(
    memory: MemoryClient, conversation: None, request_: pb.ListEventsRequest, fields: list[str]
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await memory.list_events(request_)
    assert [v.field for v in caught.value.violations] == fields


async def test_unknown_sessions_are_not_found(memory: MemoryClient, conversation: None) -> None:
    with pytest.raises(NotFound) as caught:
        await memory.get_session("nope")
    assert caught.value.reason == "SESSION_NOT_FOUND"
    with pytest.raises(NotFound):
        await memory.list_events(pb.ListEventsRequest(session_id="nope"))
    with pytest.raises(NotFound):
        async for _ in memory.watch_events("nope"):
            pass
    # Named with another project than its own, a session is not found either.
    with pytest.raises(NotFound):
        await memory.list_events(pb.ListEventsRequest(session_id="s-1", project_id="p-2"))
    response = await memory.list_events(pb.ListEventsRequest(session_id="s-1", project_id="p-1", page_size=1))
    assert [event.seq for event in response.events] == [1]


async def test_reading_after_the_last_seq_is_empty_and_watching_from_there_is_out_of_range(
    memory: MemoryClient, conversation: None
) -> None:
    response = await memory.list_events(pb.ListEventsRequest(session_id="s-1", after_seq=30))
    assert list(response.events) == []
    assert response.next_page_token == ""
    with pytest.raises(OutOfRange) as caught:
        async for _ in memory.watch_events("s-1", after_seq=31):
            pass
    assert caught.value.reason == "AFTER_SEQ_AHEAD"


async def test_page_size_defaults_to_100_and_is_capped_at_1000(memory: MemoryClient) -> None:
    for start in range(0, 1100, 100):
        await memory.append_events("big", "p-1", [new_event(str(n)) for n in range(start, start + 100)])
    assert len((await memory.list_events(pb.ListEventsRequest(session_id="big"))).events) == 100
    capped = await memory.list_events(pb.ListEventsRequest(session_id="big", page_size=5000))
    assert len(capped.events) == 1000
    assert capped.next_page_token


async def test_sessions_are_listed_most_recently_active_first(memory: MemoryClient) -> None:
    for name in ("s-a", "s-b", "s-c", "s-d", "s-e"):
        await memory.append_events(name, "p-1", [new_event(agent=f"agent-{name}")])
    await memory.append_events("elsewhere", "p-2", [new_event()])
    await memory.append_events("s-b", "p-1", [new_event("b is active again")])

    names = []
    token = ""
    while True:
        response = await memory.list_sessions("p-1", page_size=2, page_token=token)
        assert response.total_size == 5
        names += [session.id for session in response.sessions]
        token = response.next_page_token
        if not token:
            break
    assert names == ["s-b", "s-e", "s-d", "s-c", "s-a"]
    session = (await memory.list_sessions("p-1", page_size=1)).sessions[0]
    assert (session.agent, session.last_seq, session.first_seq) == ("agent-s-b", 2, 1)
    assert session.updated_at.ToDatetime() > session.created_at.ToDatetime()
    assert (await memory.list_sessions("p-unknown")).total_size == 0
    with pytest.raises(InvalidArgument) as caught:
        await memory.list_sessions("")
    assert [v.field for v in caught.value.violations] == ["project_id"]


async def test_a_page_number_reaches_its_sessions_in_one_call(memory: MemoryClient) -> None:
    for name in ("s-a", "s-b", "s-c", "s-d", "s-e"):
        await memory.append_events(name, "p-1", [new_event()])

    pages = [await memory.list_sessions("p-1", page_size=2, page=n) for n in (1, 2, 3, 4)]

    assert [[s.id for s in page.sessions] for page in pages] == [["s-e", "s-d"], ["s-c", "s-b"], ["s-a"], []]
    assert [page.total_size for page in pages] == [5, 5, 5, 5]
    # The token a numbered page hands out goes on from there.
    following = await memory.list_sessions("p-1", page_size=2, page_token=pages[1].next_page_token)
    assert [s.id for s in following.sessions] == ["s-a"]
    assert (await memory.list_sessions("p-none", page=3)).sessions == []
    for bad in ({"page": -1}, {"page": 2, "page_token": pages[0].next_page_token}):
        with pytest.raises(InvalidArgument) as caught:
            await memory.list_sessions("p-1", **bad)
        assert [v.field for v in caught.value.violations] == ["page"]
