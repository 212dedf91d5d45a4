"""A remote A2A agent's question, asked through the delegating run (docs/a2a.md): a delegated
remote task that stops in `input-required` does not end its delegation. The delegation stays open
(no response), the delegating run records a request for input of kind `question` — the remote's
message, the delegation path naming the remote agent — and suspends as for `ask_user`
(loops/asking.py). The person's one response reaches whichever executor resumes the run, which
goes on with the delegation here: an answer is the next message on the same remote task, which is
followed to its end (or to its next question: asked as a new request); a denial or an expiry
cancels the task, and the delegation ends without an answer."""

from __future__ import annotations

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.delegation.delegator import Delegator
from agentmesh.executor.delegation.outcome import DelegationResult
from agentmesh.executor.durability.run_log import LoggedCall

_DENY = run_pb2.INPUT_DECISION_DENY


async def go_on(
    delegator: Delegator,
    scope: RunScope,
    open_call: LoggedCall,
    request_id: str,
    response: run_pb2.InputResponse,
    *,
    expired: bool,
) -> DelegationResult:
    """The delegation of `open_call` after the response to its remote's question (request
    `request_id`). An answer recorded before this run's executor stopped may have reached the
    remote: it is not sent again — the task is followed from where it is (asking anew if it still
    waits)."""
    call = open_call.call
    call.asked_after = request_id  # a question the task asks next is a new request
    ended = ""
    if expired or response.reason == "expired":
        ended = "nobody answered before the request expired"
    elif response.decision == _DENY:
        who = response.responder or "a person"
        ended = f"{who} declined to answer" + (f": {response.reason}" if response.reason else "")
    if open_call.received is not None and not ended:
        return await delegator.resume(scope, call.name, call.task, open_call.event)
    return await delegator.answer_remote(scope, call.name, open_call.event, response.answer, ended=ended)
