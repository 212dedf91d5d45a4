"""A tool call of a resumed run whose outcome is unknown (docs/durability.md): its executor stopped
after it may have run and before its result was recorded, and its tool is not idempotent. It is
not run again: its result says so, and the model reads it."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.durability.recorder import EventType, NewEvent
from agentmesh.executor.durability.run_log import IN_DOUBT, LoggedCall
from agentmesh.executor.tools.base import ToolOutput


async def answer(scope: RunScope, open_call: LoggedCall) -> ToolOutput:
    """Records and streams the call's result (`in_doubt` in its metadata), and returns it."""
    call = open_call.call
    text = f"{call.name}: {IN_DOUBT}"
    (event,) = await scope.recorder.record_coalesced(
        [
            NewEvent(
                EventType.EVENT_TYPE_TOOL_RESULT,
                text,
                metadata={"call_id": call.id, "tool": call.name, "is_error": True, "in_doubt": True},
                parent_event_id=open_call.event.id,
            )
        ]
    )
    await scope.sink.emit(
        scope.origin.event(
            seq=event.seq,
            tool_result=run_pb2.ToolResult(call_id=call.id, name=call.name, output=text, is_error=True),
        )
    )
    return ToolOutput(text, is_error=True)
