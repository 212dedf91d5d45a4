"""A chat whose run has started, as its faces read it: every event as it comes (`ChatStream`,
which follows the session's log when the executor's stream breaks) or just the addressed agent's
answer text (`AnswerStream`), and the error a failed run stands for (`run_failure`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.models import ChatResult
from agentmesh.runtime.errors import DomainError, Internal, error_for_code, from_status_proto

logger = logging.getLogger(__name__)

Resume = Callable[[int], Awaitable[AsyncIterator[run_pb2.RunEvent]]]
# Told of every event of a chat as it is read, before its answer text is (a face that reports
# progress while the answer is held back).
EventSeen = Callable[[run_pb2.RunEvent], Awaitable[None]]


async def from_run_started(
    events: AsyncIterator[run_pb2.RunEvent], run_id: str
) -> AsyncIterator[run_pb2.RunEvent]:
    """A session's log followed from its start, from run `run_id`'s `run_started` (made of its
    recorded input) on: the session's earlier runs are not this chat's."""
    started = False
    async for event in events:
        started = started or (event.run_id == run_id and event.HasField("run_started"))
        if started:
            yield event


async def _after_first(events: AsyncIterator[run_pb2.RunEvent]) -> AsyncIterator[run_pb2.RunEvent]:
    skipped = False
    async for event in events:
        if skipped:
            yield event
        skipped = True


class ChatStream:
    """A chat whose run has started: its events as they come (the sub-agents' included), or
    just the addressed agent's answer. Leaving early (`aclose`) cancels the run below at once.

    When the executor's stream breaks (UNAVAILABLE: the executor died or was cut off) the chat
    goes on from the session's log (`resume`, resume.py) after the last recorded `seq` it
    carried, up to the run's one final event — wherever the run ends, a whole answer (unary
    Chat) or the rest of the stream arrives, not the broken connection's error."""

    def __init__(
        self,
        session_id: str,
        first: run_pb2.RunEvent,
        rest: AsyncIterator[run_pb2.RunEvent],
        *,
        resume: Resume | None = None,
        run_id: str = "",
    ) -> None:
        self.session_id = session_id
        # The addressed agent's run: the one the first event opens, unless named (a resumed run's
        # stream starts wherever it was followed from).
        self.run_id = run_id or first.run_id
        self._first: run_pb2.RunEvent | None = first
        self._rest = rest
        self._resume = resume
        self.last_seq = 0  # the highest recorded seq carried so far
        self.result = ChatResult(session_id=session_id, run_id=self.run_id)

    async def events(self) -> AsyncIterator[run_pb2.RunEvent]:
        """Every event of the run, the first one included."""
        if self._first is not None:
            first, self._first = self._first, None
            self.last_seq = max(self.last_seq, first.seq)
            yield first
        try:
            async for event in self._rest:
                self.last_seq = max(self.last_seq, event.seq)
                yield event
            return
        except DomainError as error:
            if self._resume is None or error.code != grpc.StatusCode.UNAVAILABLE:
                raise
            logger.warning("the stream of run %s broke (%s): following it in the log", self.run_id, error)
        async for event in self._from_log():
            yield event

    async def _from_log(self) -> AsyncIterator[run_pb2.RunEvent]:
        assert self._resume is not None
        after_seq = self.last_seq
        rest = await self._resume(after_seq)
        if not after_seq:
            # Nothing recorded reached the caller yet: the log is followed from the run's input
            # on (earlier runs of the session are not this chat's), which the caller saw as its
            # run_started already.
            rest = _after_first(from_run_started(rest, self.run_id))
        async for event in rest:
            self.last_seq = max(self.last_seq, event.seq)
            yield event

    async def answer(self, *, seen: EventSeen | None = None) -> AsyncIterator[str]:
        """The addressed agent's answer as it streams (see `AnswerStream`); once it is spent,
        `result` holds the whole answer. A run that failed raises its error. `seen`, when given,
        is told of every event first."""
        answer = AnswerStream(self.run_id)
        completed: run_pb2.RunCompleted | None = None
        requests: list[run_pb2.InputRequest] = []
        async for event in self.events():
            if seen is not None:
                await seen(event)
            text = answer.feed(event)
            if text:
                yield text
            if event.HasField("input_requested"):
                requests.append(event.input_requested.request)
            if event.run_id != self.run_id:
                continue  # a sub-agent's or a delegated worker's step
            if event.HasField("run_completed"):
                completed = event.run_completed
            elif event.HasField("run_failed"):
                raise run_failure(event.run_failed)
            elif event.HasField("run_suspended"):
                # It waits for a person: what it asks is the answer for now.
                asked = [r for r in requests if r.id in event.run_suspended.request_ids]
                self.result.input_requests = asked
                self.result.content = asking_text(asked)
                for rest in answer.finish(self.result.content):
                    yield rest
                return
        if completed is None:
            raise Internal("the run ended without an answer")
        for rest in answer.finish(completed.content):
            yield rest
        self.result.content = completed.content
        self.result.usage = completed.usage
        self.result.max_steps_reached = completed.max_steps_reached

    async def result_at_end(self, *, seen: EventSeen | None = None) -> ChatResult:
        """Spends the answer (`answer`, telling `seen` of each event) and returns `result`; the
        stream is closed after."""
        async with contextlib.aclosing(self):
            async for _ in self.answer(seen=seen):
                pass
        return self.result

    async def aclose(self) -> None:
        await self._rest.aclose()  # type: ignore[attr-defined]


async def chat_of_log(session_id: str, run_id: str, events: AsyncIterator[run_pb2.RunEvent]) -> ChatStream:
    """A resumed run's events from the log as a chat (the log is where it is followed from
    already: nothing to resume when it breaks)."""
    first = await anext(events, None)
    if first is None:
        await events.aclose()  # type: ignore[attr-defined]
        raise Internal(f"run {run_id} resumed with no event")
    return ChatStream(session_id, first, events, run_id=run_id)


def asking_text(requests: list[run_pb2.InputRequest]) -> str:
    """What a suspended run asks, as text for faces that carry only text (unary Chat, the
    OpenAI-compatible API): each request's question, one paragraph each, naming the request. A
    client tool call is not text: the OpenAI-compatible faces return it as a tool call."""
    return "\n\n".join(
        f"{request.question}\n(request {request.id}: "
        + ("answer it" if request.kind == run_pb2.INPUT_KIND_QUESTION else "approve or deny it")
        + ")"
        for request in requests
        if request.kind != run_pb2.INPUT_KIND_CLIENT_TOOL
    )


def run_failure(failed: run_pb2.RunFailed) -> DomainError:
    """The DomainError for a run that ended with RunFailed: the one its status stands for (code,
    reason, details), or, from an executor that sends no status, one made from the code name."""
    if failed.HasField("status"):
        return from_status_proto(failed.status)
    code = getattr(grpc.StatusCode, failed.code, grpc.StatusCode.INTERNAL)
    return error_for_code(code)(failed.message or failed.code, reason=f"RUN_{failed.code or 'FAILED'}")


class AnswerStream:
    """Picks the addressed agent's answer text out of a run's events as they stream: what is
    streamed adds up to the plain reply (RunCompleted's content).

    Only the addressed run's text counts (never a sub-agent's or a delegated worker's), and
    fenced ```delegate / ```tool_call blocks — step markers for models without function calling —
    are held back and dropped. An agent that cannot act (no tools, no delegation: `may_act` off)
    answers with its first step, whose text streams as it comes. One that may act answers with
    the step that ends without acting, so each step's text is held until the run completes with
    it (a step that calls a tool or delegates is dropped: the coordinator's "let me ask the
    worker" is not the answer). `finish` returns what is still missing of the final answer (all
    of it for workflow agents, whose answer arrives only with RunCompleted).
    """

    _MARKERS = ("delegate", "tool_call")
    _FENCE = "```"
    _STEP_SEPARATOR = "\n\n"

    def __init__(self, run_id: str = "") -> None:
        self.run_id = run_id  # the addressed run: the first event's unless given
        self.sent = ""  # everything released so far
        self._live = True  # text streams as it comes (the agent cannot act)
        self._step_sent = ""  # released during the current model step
        self._held: list[str] = []  # the current step's text, held until it is the answer
        self._pending = ""  # text of the current step not yet released

    def feed(self, event: run_pb2.RunEvent) -> str:
        """The text to send for this event ("" when none)."""
        if not self.run_id:
            self.run_id = event.run_id
        if event.run_id != self.run_id:
            return ""
        if event.HasField("run_started"):
            self._live = not event.run_started.may_act
        if (
            event.HasField("step_started")
            or event.HasField("tool_call")
            or event.HasField("delegation_request")
        ):
            # A new step, or the step acts: what it said so far is not the answer.
            self._pending = ""
            self._step_sent = ""
            self._held = []
            return ""
        if not event.HasField("text_delta"):
            return ""
        self._pending += event.text_delta.text
        released = self._release()
        if self._live:
            return self._emit(released)
        if released:
            self._held.append(released)
        return ""

    def finish(self, content: str) -> list[str]:
        """The rest of the final answer `content` that the caller has not seen yet, in pieces.
        The answer may differ from the streamed text by surrounding whitespace only."""
        if not self._live:
            # Held pieces go out as they came (so the answer still arrives in chunks), exactly.
            said = "".join(self._held)
            pieces = [*self._held, content[len(said) :]] if content.startswith(said) else [content]
            return [self._emit(piece) for piece in pieces if piece]
        said, answer = self._step_sent.strip(), content.strip()
        if answer.startswith(said):
            rest = self._emit(answer[len(said) :])
        else:
            self._step_sent = ""  # the answer is not what this step streamed: send it whole
            rest = self._emit(answer)
        return [rest] if rest else []

    def _emit(self, text: str) -> str:
        if not text:
            return ""
        # An earlier step already said something: keep the steps apart.
        prefix = self._STEP_SEPARATOR if self.sent and not self._step_sent else ""
        self._step_sent += text
        self.sent += prefix + text
        return prefix + text

    def _release(self) -> str:
        out: list[str] = []
        while self._pending:
            start = self._pending.find(self._FENCE)
            if start < 0:
                # Keep a trailing "`" or "``": it may open a fence with the next chunk.
                keep = len(self._pending) - len(self._pending.rstrip("`"))
                cut = len(self._pending) - keep
                out.append(self._pending[:cut])
                self._pending = self._pending[cut:]
                break
            out.append(self._pending[:start])
            self._pending = self._pending[start:]
            end = self._pending.find(self._FENCE, len(self._FENCE))
            if end < 0:
                break  # the fence is still open: wait for the rest of the block
            block = self._pending[: end + len(self._FENCE)]
            self._pending = self._pending[end + len(self._FENCE) :]
            info = block[len(self._FENCE) :].split("\n", 1)[0].strip()
            if info not in self._MARKERS:
                out.append(block)
        return "".join(out)
