"""An agent's context built to a token budget, its older history summarized once into the log.

With a budget (the agent type's `context_budget_tokens`, else the executor's default), a run's
history is not the last N events but as many of the agent's recent turns as fit the budget
beside the instructions and the input, counted with an estimate of four characters a token
(close for English text with the common BPE tokenizers, and free: no tokenizer to load or to
keep per model). The agent's newest `context_compacted` event stands for every turn up to its
`to_seq`: the history is that summary, then the turns after it.

When those do not fit, the older turns are summarized by one model call (the type's
`compaction_model`, else the agent's own, given the type's `compaction_prompt`, else `SUMMARIZE`)
together with the summary they follow, and the result
is recorded as a new `context_compacted` event (metadata: the seq range it replaces). The log
keeps every event; the summary is made once and every later run, on any executor, reads it from
the log. Compaction keeps only half the room for recent turns, so the runs after it fit without
compacting again. A failed summary call leaves the run on the turns that fit (the older ones
left out) and says so in a `context_compacted` event marked `failed`, which prompts never use.

The read goes newest first and stops at the newest summary (or after `MAX_HISTORY_EVENTS`), so
its cost does not grow with the session.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from agentmesh.executor.durability.recorder import EventType, Recorder
from agentmesh.executor.providers.base import ChatModel, Message, ModelError
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.registry.v1.resources_pb2 import AgentSpec
from agentmesh.runtime.errors import DomainError, NotFound

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
# The most events a history read goes back when it finds no summary (a session that grew before
# it had a budget): older ones are left out, as a window would leave them.
MAX_HISTORY_EVENTS = 2_000
_PAGE_EVENTS = 500
# A summary longer than this share of the budget is cut: it must leave room for the turns.
_SUMMARY_SHARE = 4
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
SUMMARIZE = (
    "Summarize the conversation below for the assistant who will continue it: keep every fact, "
    "decision, name, number and open question it will need; leave out pleasantries. Answer with "
    "the summary only."
)
_ROLES = {
    EventType.EVENT_TYPE_USER_MESSAGE: "user",
    EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED: "user",
    EventType.EVENT_TYPE_AGENT_RESPONSE: "assistant",
}


def estimate_tokens(text: str) -> int:
    """Tokens `text` takes in a prompt, estimated (see the module's docstring)."""
    return len(text) // CHARS_PER_TOKEN + 1


@dataclass(frozen=True)
class BudgetedContext:
    """Who the history is for and what else the prompt holds."""

    session_id: str
    project_id: str
    agent: str
    run_id: str
    budget_tokens: int
    fixed_tokens: int  # the instructions and the input
    summarize: str = SUMMARIZE  # the summarizing model's instructions

    @classmethod
    def of(
        cls, recorder: Recorder, run_id: str, budget_tokens: int, fixed: Sequence[str], spec: AgentSpec
    ) -> BudgetedContext:
        """The context of `recorder`'s run of the agent `spec`, whose prompt holds the `fixed` texts
        besides history; its older turns summarized with the type's `compaction_prompt`, else
        `SUMMARIZE`."""
        return cls(
            session_id=recorder.session_id,
            project_id=recorder.project_id,
            agent=recorder.agent,
            run_id=run_id,
            budget_tokens=budget_tokens,
            fixed_tokens=estimate_tokens("".join(fixed)),
            summarize=spec.compaction_prompt or SUMMARIZE,
        )


async def budgeted_history(
    memory: MemoryClient, recorder: Recorder, summarizer: ChatModel, context: BudgetedContext
) -> list[Message]:
    """The run's history within the budget: the newest summary, then the turns after it that fit,
    compacting the older ones first when they do not (see the module's docstring)."""
    summary, turns = await _read(memory, context)
    available = context.budget_tokens - context.fixed_tokens - _tokens_of(summary)
    kept = _newest_that_fit(turns, available)
    if len(kept) == len(turns):
        return _messages(summary, turns)
    # Compacting: half the room goes to recent turns, so that the next runs fit as they are.
    recent = _newest_that_fit(turns, (context.budget_tokens - context.fixed_tokens) // 2)
    older = turns[: len(turns) - len(recent)]
    from_seq = int(summary.metadata["from_seq"]) if summary is not None else older[0].seq
    to_seq = older[-1].seq
    try:
        text = await _summarize(summarizer, context.summarize, summary, older)
    except (ModelError, DomainError, TimeoutError) as error:
        logger.warning("run %s: compacting seq %d-%d failed: %s", context.run_id, from_seq, to_seq, error)
        await recorder.record(
            EventType.EVENT_TYPE_CONTEXT_COMPACTED,
            f"the summary of seq {from_seq}-{to_seq} failed ({error}); this run's prompt leaves "
            f"those turns out",
            metadata={"from_seq": from_seq, "to_seq": to_seq, "failed": True, "model": summarizer.name},
        )
        return _messages(summary, kept)
    cap = context.budget_tokens // _SUMMARY_SHARE * CHARS_PER_TOKEN
    text = text if len(text) <= cap else text[:cap]
    event = await recorder.record(
        EventType.EVENT_TYPE_CONTEXT_COMPACTED,
        text,
        metadata={"from_seq": from_seq, "to_seq": to_seq, "model": summarizer.name},
        idempotency_key=f"{context.run_id}:compacted",
    )
    return _messages(event, recent)


async def _read(
    memory: MemoryClient, context: BudgetedContext
) -> tuple[memory_pb2.Event | None, list[memory_pb2.Event]]:
    """The agent's newest usable summary (None: none) and its turns after it, oldest first,
    this run's own input left out."""
    turns: list[memory_pb2.Event] = []
    token = ""
    while len(turns) < MAX_HISTORY_EVENTS:
        request = memory_service_pb2.ListEventsRequest(
            session_id=context.session_id,
            project_id=context.project_id,
            agent=context.agent,
            event_types=[*_ROLES, EventType.EVENT_TYPE_CONTEXT_COMPACTED],
            page_size=_PAGE_EVENTS,
            page_token=token,
            descending=True,
            from_context_start=True,
        )
        try:
            page = await memory.list_events(request)
        except NotFound:  # a new session has no history yet
            break
        for event in page.events:
            if event.event_type == EventType.EVENT_TYPE_CONTEXT_COMPACTED:
                if not event.metadata.fields.get("failed"):
                    turns.reverse()
                    return event, turns
            elif event.run_id != context.run_id:
                turns.append(event)
        token = page.next_page_token
        if not token:
            break
    turns.reverse()
    return None, turns[-MAX_HISTORY_EVENTS:]


def _tokens_of(summary: memory_pb2.Event | None) -> int:
    return estimate_tokens(SUMMARY_PREFIX + summary.content) if summary is not None else 0


def _newest_that_fit(turns: Sequence[memory_pb2.Event], available: int) -> list[memory_pb2.Event]:
    kept: list[memory_pb2.Event] = []
    for event in reversed(turns):
        available -= estimate_tokens(event.content)
        if available < 0:
            break
        kept.append(event)
    kept.reverse()
    return kept


def _messages(summary: memory_pb2.Event | None, turns: Sequence[memory_pb2.Event]) -> list[Message]:
    head = [Message("user", SUMMARY_PREFIX + summary.content)] if summary is not None else []
    return head + [Message(_ROLES[e.event_type], e.content) for e in turns]  # type: ignore[arg-type]


async def _summarize(
    model: ChatModel, instructions: str, summary: memory_pb2.Event | None, older: Sequence[memory_pb2.Event]
) -> str:
    """One call of the summarizing model, given `instructions`, over the previous summary and the
    older turns."""
    lines = [SUMMARY_PREFIX + summary.content] if summary is not None else []
    lines += [f"{_ROLES[e.event_type]}: {e.content}" for e in older]
    prompt = [Message("system", instructions), Message("user", "\n".join(lines))]
    parts = [chunk.text async for chunk in model.stream(prompt, []) if chunk.text]
    text = "".join(parts).strip()
    if not text:
        raise ModelError(f"model {model.name} answered an empty summary")
    return text
