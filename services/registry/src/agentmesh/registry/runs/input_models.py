"""A person's input as the registry keeps it: what a suspended run asks (an approval of a tool
call, or an answer to a question), where each request stands, and its one response.

Plain pydantic models with no I/O, as `models.py`; the rules are `runs/input_requests.py`.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JsonValue = Any


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InputKind(enum.StrEnum):
    """What a suspended run asks a person for."""

    APPROVAL = "approval"  # to approve (or deny) a tool call
    QUESTION = "question"  # to answer a question
    CLIENT_TOOL = "client_tool"  # to run a tool the client offered and give back its result


class InputRequestState(enum.StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    EXPIRED = "expired"  # nobody responded in time: it counts as a denial by the system
    CANCELLED = "cancelled"  # its run was cancelled while it waited: nobody may respond


class InputDecision(enum.StrEnum):
    APPROVE = "approve"
    DENY = "deny"


class InputResponse(_Model):
    """The one response a request for input gets: an approval's `decision` (with an optional
    `reason`, and `arguments` to run an approved call with instead of the model's), or a
    question's `answer`; who gave it and when."""

    decision: InputDecision | None = None
    reason: str = ""
    answer: str = ""
    arguments: dict[str, JsonValue] | None = None
    responder: str = ""
    responded_at: datetime | None = None


class RaisedInput(_Model):
    """A request for input as a run's executor raises it (InputRequest without what the registry
    knows of the run, nor state): a time or an expiry left unset gets the registry's default."""

    id: str
    kind: InputKind
    delegation_path: list[str] = Field(default_factory=list)
    tool: str = ""
    arguments: dict[str, JsonValue] | None = None
    question: str = ""
    call_id: str = ""
    seq: int = 0
    created_at: datetime | None = None
    expires_at: datetime | None = None


class InputRequest(_Model):
    """A suspended run's request for a person's input (`runs/input_requests.py`): what it asks,
    where it stands, and its one response. `agent` is the asking agent's slug, `agent_id` its id
    (with `run_id`, the run that waits)."""

    id: str
    project_id: str
    agent_id: str
    agent: str
    session_id: str
    run_id: str
    delegation_path: list[str] = Field(default_factory=list)
    kind: InputKind
    tool: str = ""
    arguments: dict[str, JsonValue] | None = None
    question: str = ""
    call_id: str = ""
    seq: int = 0
    created_at: datetime
    expires_at: datetime
    state: InputRequestState = InputRequestState.PENDING
    response: InputResponse | None = None


@dataclasses.dataclass(frozen=True)
class Cancellation:
    """Who cancels (recorded as the requests' responder) and why (told with the runs' ends)."""

    by: str
    reason: str = ""

    @property
    def cancelled_by(self) -> str:
        """What the run's row keeps, and its taker writes into the run's end."""
        return f"{self.by}: {self.reason}" if self.reason else self.by

    def response(self, now: datetime) -> InputResponse:
        return InputResponse(
            decision=InputDecision.DENY,
            reason=self.reason or "the run was cancelled",
            responder=self.by,
            responded_at=now,
        )
