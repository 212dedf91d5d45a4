"""Pure conversions between agentmesh's runs and A2A v1.0 tasks (a2a.types protos).

An A2A task is one agentmesh run: the run a user message started in a session (the task's
context). Its id names both, `{run_id}~{session_id}` (`~` never occurs in either), so any gateway
replica finds the task in the memory service's event log from the id alone. A task's state,
history and answer artifact are read from the run's recorded events (`task_from_events`); a
stream of the run's steps — live from the executor, or replayed from the log — becomes A2A
stream events through `TaskEventStream`, the same way for both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.answers import response_from_data, response_from_text
from agentmesh.gateway.chat_stream import AnswerStream
from agentmesh.gateway.errors import InvalidRequest
from agentmesh.gateway.resume import input_request, is_final, json_content
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.protos import struct_to_dict

EventType = resources_pb2.EventType
TaskState = a2a_pb2.TaskState

ANSWER_ARTIFACT = "answer"
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_SEPARATOR = "~"

Update = a2a_pb2.TaskStatusUpdateEvent | a2a_pb2.TaskArtifactUpdateEvent


@dataclass(frozen=True)
class TaskId:
    """Where a task lives: its run and the session (A2A context) the run worked in."""

    run_id: str
    session_id: str

    @classmethod
    def parse(cls, text: str) -> TaskId | None:
        run_id, separator, session_id = text.partition(_SEPARATOR)
        if not separator or not run_id or not session_id:
            return None
        return cls(run_id, session_id)

    def __str__(self) -> str:
        return f"{self.run_id}{_SEPARATOR}{self.session_id}"


def message_text(message: a2a_pb2.Message) -> str:
    """The text of an incoming message, as the agent's model reads it: text parts as they are,
    data parts as their JSON (compact, one line), joined by new lines. File parts (raw bytes or
    a URL) are refused with the spec's ContentTypeNotSupportedError naming the part, rather than
    silently dropped: a model cannot open them."""
    texts: list[str] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(
                json.dumps(
                    MessageToDict(part.data), ensure_ascii=False, separators=(",", ":"), sort_keys=True
                )
            )
        else:
            raise a2a_errors.ContentTypeNotSupportedError(
                f"message.parts[{index}]: agents take text and data parts, not files ({kind or 'empty'})"
            )
    if not texts:
        raise InvalidRequest.field("message.parts", "a message needs at least one text or data part")
    return "\n".join(texts)


def message_reply(request: run_pb2.InputRequest, message: a2a_pb2.Message) -> run_pb2.InputResponse:
    """The response a message on an `input-required` task gives its request: a data part with
    the fields REST takes (`{"decision", "reason"?}` or `{"answer"}`), else the message's text
    (`approve` / `deny[: reason]`, or a question's answer: answers.py)."""
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") == "data" and part.data.HasField("struct_value"):
            data = struct_to_dict(part.data.struct_value)
            if {"decision", "answer"} & set(data):
                return response_from_data(request, data, field=f"message.parts[{index}].data")
    text = "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")
    return response_from_text(request, text, field="message.parts")


def agent_message(text: str, *, task: TaskId, message_id: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=message_id,
        context_id=task.session_id,
        task_id=str(task),
        role=a2a_pb2.Role.ROLE_AGENT,
        parts=[a2a_pb2.Part(text=text)],
    )


def user_message(text: str, *, task: TaskId, message_id: str) -> a2a_pb2.Message:
    message = agent_message(text, task=task, message_id=message_id)
    message.role = a2a_pb2.Role.ROLE_USER
    return message


def input_required_message(
    request: run_pb2.InputRequest, *, task: TaskId, message_id: str, pending: int = 1
) -> a2a_pb2.Message:
    """The status message of a task waiting for input: the request's question as text, and the
    request as a data part (`input_request`: id, kind, tool, arguments, question, expires_at),
    with how many requests wait when more than this one (the next message answers this one)."""
    message = agent_message(request.question, task=task, message_id=message_id)
    described: dict[str, object] = {
        "id": request.id,
        "kind": run_pb2.InputKind.Name(request.kind).removeprefix("INPUT_KIND_").lower(),
        "tool": request.tool,
        "arguments": struct_to_dict(request.arguments),
        "question": request.question,
        "expires_at": request.expires_at.ToJsonString() if request.HasField("expires_at") else "",
    }
    data = struct_pb2.Struct()
    data.update({"input_request": described, "pending_requests": pending})
    message.parts.append(a2a_pb2.Part(data=struct_pb2.Value(struct_value=data)))
    return message


def reply_text(content: str) -> str:
    """A recorded response (an `input_received` event's content) as the user's message it was:
    the answer, or the decision with its reason; "" for an expiry (nobody said anything)."""
    body = json_content(content)
    if body.get("expired"):
        return ""
    if body.get("answer"):
        return str(body["answer"])
    decision, reason = str(body.get("decision") or ""), str(body.get("reason") or "")
    return f"{decision}: {reason}" if decision and reason else decision


def answer_artifact(text: str) -> a2a_pb2.Artifact:
    return a2a_pb2.Artifact(
        artifact_id=ANSWER_ARTIFACT, name=ANSWER_ARTIFACT, parts=[a2a_pb2.Part(text=text)]
    )


RunState = resources_pb2.RunState
# The memory service's state of the run behind each state an inbound task can be in: what
# ListTasks' `status` filters by. The memory service does not tell a suspended run from a
# running one, so `input-required` is not a filter (`working` lists both).
RUN_STATES: dict[a2a_pb2.TaskState.ValueType, resources_pb2.RunState.ValueType] = {
    TaskState.TASK_STATE_WORKING: RunState.RUN_STATE_RUNNING,
    TaskState.TASK_STATE_COMPLETED: RunState.RUN_STATE_ANSWERED,
    TaskState.TASK_STATE_FAILED: RunState.RUN_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED: RunState.RUN_STATE_CANCELLED,
}


def failed_state(code: str) -> a2a_pb2.TaskState.ValueType:
    return TaskState.TASK_STATE_CANCELED if code == "CANCELLED" else TaskState.TASK_STATE_FAILED


@dataclass
class TaskSnapshot:
    """A task as its recorded events tell it, and the last `seq` they reached (where a
    subscriber follows on from)."""

    task: a2a_pb2.Task
    last_seq: int

    @property
    def is_terminal(self) -> bool:
        return self.task.status.state in TERMINAL_STATES


# The events of a run that make its task (`task_from_events`): its messages, its requests for input
# and their answers, and its end. A run's other events (tool calls, delegations, errors it
# recovered from) are many more, and a task read (GetTask, ListTasks) never reads them.
TASK_EVENT_TYPES = (
    EventType.EVENT_TYPE_USER_MESSAGE,
    EventType.EVENT_TYPE_INPUT_REQUESTED,
    EventType.EVENT_TYPE_INPUT_RECEIVED,
    EventType.EVENT_TYPE_AGENT_RESPONSE,
    EventType.EVENT_TYPE_ERROR,
)


def told_enough(newest_first: Sequence[resources_pb2.Event], history_length: int | None) -> bool:
    """Whether a run's task events read newest first (of TASK_EVENT_TYPES) hold all that
    `task_from_events` needs for a task with `history_length` messages of history: its end
    (which settles its state: no request still pending) and that many messages. Without an end
    (working, input-required) or a bound, every one is needed."""
    if history_length is None or not any(is_final(event) for event in newest_first):
        return False
    messages = sum(
        1
        for event in newest_first
        if event.event_type in (EventType.EVENT_TYPE_USER_MESSAGE,)
        or is_final(event)
        or (event.event_type == EventType.EVENT_TYPE_INPUT_RECEIVED and reply_text(event.content))
    )
    return messages >= history_length


def task_from_events(
    task_id: TaskId, events: Sequence[resources_pb2.Event], *, history_length: int | None = None
) -> TaskSnapshot:
    """The task of a run from its own recorded events in `seq` order (the user message first).
    A run that recorded requests for input not yet answered (`input_requested` without its
    `input_received`) and no end is `input-required`, its status message the oldest request;
    each response recorded is the user's message in the history."""
    task = a2a_pb2.Task(id=str(task_id), context_id=task_id.session_id)
    task.status.state = TaskState.TASK_STATE_WORKING
    history: list[a2a_pb2.Message] = []
    pending: dict[str, run_pb2.InputRequest] = {}
    last_seq = 0
    for event in events:
        last_seq = max(last_seq, event.seq)
        task.status.timestamp.CopyFrom(event.created_at)
        if event.event_type == EventType.EVENT_TYPE_USER_MESSAGE:
            history.append(user_message(event.content, task=task_id, message_id=event.id))
        elif event.event_type == EventType.EVENT_TYPE_INPUT_REQUESTED:
            request = input_request(event, [])
            pending[request.id] = request
        elif event.event_type == EventType.EVENT_TYPE_INPUT_RECEIVED:
            pending.pop(event.metadata.fields["request_id"].string_value, None)
            if said := reply_text(event.content):
                history.append(user_message(said, task=task_id, message_id=event.id))
        elif is_final(event):
            pending.clear()
            reply = agent_message(event.content, task=task_id, message_id=event.id)
            history.append(reply)
            task.status.message.CopyFrom(reply)
            if event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
                task.status.state = TaskState.TASK_STATE_COMPLETED
                task.artifacts.append(answer_artifact(event.content))
                # What the tree used, as the live answer said it (TaskEventStream.feed).
                if "tree_usage" in event.metadata.fields:
                    usage = MessageToDict(event.metadata.fields["tree_usage"].struct_value)
                    task.metadata.update({"agentmesh": {"usage": usage}})
            else:
                task.status.state = failed_state(str(event.metadata.fields["code"].string_value))
    if pending:
        oldest = min(pending.values(), key=lambda request: request.seq)
        asking = input_required_message(
            oldest, task=task_id, message_id=f"{oldest.id}-asked", pending=len(pending)
        )
        history.append(asking)
        task.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
        task.status.message.CopyFrom(asking)
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task.history.extend(history)
    return TaskSnapshot(task, last_seq)


class TaskEventStream:
    """Turns a run's RunEvents (live or replayed from the log) into A2A stream events: the
    addressed agent's answer as `answer` artifact chunks, each step of the run and of the runs
    below it (tool calls, delegations) as a `working` status update whose message says what
    happened, and the end as the final status update. `task` holds what the stream has told."""

    def __init__(self, task_id: TaskId, run_id: str) -> None:
        self.task_id = task_id
        self._run_id = run_id
        self._answer = AnswerStream(run_id)
        self._asked: dict[str, run_pb2.InputRequest] = {}
        self._chunks = 0
        self._steps = 0
        self.task = a2a_pb2.Task(id=str(task_id), context_id=task_id.session_id)
        self.task.status.state = TaskState.TASK_STATE_WORKING

    @property
    def done(self) -> bool:
        return self.task.status.state in TERMINAL_STATES

    @property
    def waiting(self) -> bool:
        """The run suspended: the task waits for input (the stream of this run is over)."""
        return self.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

    def feed(self, event: run_pb2.RunEvent) -> list[Update]:
        out = [self._chunk(text) for text in [self._answer.feed(event)] if text]
        kind = event.WhichOneof("kind")
        if event.run_id == self._run_id and kind == "run_completed":
            out.extend(self._chunk(text) for text in self._answer.finish(event.run_completed.content))
            self.task.artifacts.append(answer_artifact(event.run_completed.content))
            # What the whole delegation tree used: an agentmesh caller delegating over A2A rolls
            # it into its own run's usage.
            self.task.metadata.update({"agentmesh": {"usage": usage_metadata(event.run_completed.usage)}})
            completed = self._status(TaskState.TASK_STATE_COMPLETED, event.run_completed.content)
            completed.metadata.CopyFrom(self.task.metadata)
            out.append(completed)
        elif event.run_id == self._run_id and kind == "run_failed":
            failed = event.run_failed
            out.append(self._status(failed_state(failed.code), failed.message or failed.code))
        elif kind == "input_requested":  # its own, or a delegated run's below it
            request = event.input_requested.request
            self._asked[request.id] = request
        elif event.run_id == self._run_id and kind == "run_suspended":
            asked = [self._asked[i] for i in event.run_suspended.request_ids if i in self._asked]
            if asked:
                out.append(self._input_required(asked[0], pending=len(event.run_suspended.request_ids)))
        elif kind in ("tool_call", "tool_result", "delegation_request", "delegation_response", "error"):
            out.append(self._step(event, kind))
        return out

    def fail(self, message: str) -> a2a_pb2.TaskStatusUpdateEvent:
        """The end of a stream that broke off (the executor went away): the task failed."""
        return self._status(TaskState.TASK_STATE_FAILED, message)

    def _chunk(self, text: str) -> a2a_pb2.TaskArtifactUpdateEvent:
        self._chunks += 1
        return a2a_pb2.TaskArtifactUpdateEvent(
            task_id=str(self.task_id),
            context_id=self.task_id.session_id,
            artifact=answer_artifact(text),
            append=self._chunks > 1,
        )

    def _status(self, state: a2a_pb2.TaskState.ValueType, text: str) -> a2a_pb2.TaskStatusUpdateEvent:
        self._steps += 1
        message = agent_message(text, task=self.task_id, message_id=f"{self._run_id}-{self._steps}")
        return self._update(state, message)

    def _input_required(
        self, request: run_pb2.InputRequest, *, pending: int
    ) -> a2a_pb2.TaskStatusUpdateEvent:
        self._steps += 1
        message = input_required_message(
            request, task=self.task_id, message_id=f"{self._run_id}-{self._steps}", pending=pending
        )
        return self._update(TaskState.TASK_STATE_INPUT_REQUIRED, message)

    def _update(
        self, state: a2a_pb2.TaskState.ValueType, message: a2a_pb2.Message
    ) -> a2a_pb2.TaskStatusUpdateEvent:
        self.task.status.state = state
        self.task.status.message.CopyFrom(message)
        self.task.status.timestamp.GetCurrentTime()
        return a2a_pb2.TaskStatusUpdateEvent(
            task_id=str(self.task_id), context_id=self.task_id.session_id, status=self.task.status
        )

    def _step(self, event: run_pb2.RunEvent, kind: str) -> a2a_pb2.TaskStatusUpdateEvent:
        update = self._status(TaskState.TASK_STATE_WORKING, _describe(event, kind))
        step = {
            "event": kind,
            "agent": event.agent,
            "delegation_path": list(event.delegation_path),
            "seq": event.seq,
        }
        update.metadata.update({"agentmesh": step})
        return update


def usage_metadata(usage: run_pb2.Usage) -> dict[str, Any]:
    """A run's usage as an A2A task's metadata carries it (`agentmesh.usage`): tokens, and the
    cost in US dollars, null when unknown (a model called has no price)."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "cost": usage.cost if usage.cost_known else None,
        "unpriced_models": list(usage.unpriced_models),
    }


def _describe(event: run_pb2.RunEvent, kind: str) -> str:
    """A step in words, for a status update's message."""
    if kind == "delegation_request":
        request = event.delegation_request
        return f"{event.agent} delegates to {request.target_agent}: {request.task}"
    if kind == "delegation_response":
        response = event.delegation_response
        outcome = run_pb2.DelegationOutcome.Name(response.outcome).removeprefix("DELEGATION_OUTCOME_").lower()
        return f"{response.target_agent} answered {event.agent} ({outcome}): {response.content}"
    if kind == "tool_call":
        return f"{event.agent} calls tool {event.tool_call.name}"
    if kind == "tool_result":
        return f"tool {event.tool_result.name} returned to {event.agent}"
    return f"{event.agent}: {event.error.message}"
