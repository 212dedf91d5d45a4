"""A person in the loop at the terminal: what a suspended run asks, shown; the person's answer,
read; and the run resumed and streamed, as long as it asks (DESIGN §12, docs/human-in-the-loop.md).

`settle` is what `agentmesh chat`, its prompt and `agentmesh approve | deny | answer` do once a
stream ends with `run_suspended`. With a person at the terminal (standard input a terminal) it
asks them — an approval as `approve? [y/N/reason]`, a question as `answer> ` — and responds.
Without one (input piped), or when the person leaves it (Ctrl-D, Ctrl-C), it prints each request
with the commands that answer it, and the command exits with `EXIT_WAITING`: the run waits,
durably, for whoever answers, through any face.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from agentmesh.cli.client import describe
from agentmesh.cli.conversation import ChatOutcome, ChatSession, asked_text
from agentmesh.common.v1 import run_pb2
from agentmesh.runtime.errors import DomainError

# The exit status of a command whose run waits for a person (1 is a failure, 0 an answer).
EXIT_WAITING = 3
APPROVE_PROMPT = "approve? [y/N/reason] "
ANSWER_PROMPT = "answer> "
_YES = frozenset({"y", "yes"})
_NO = frozenset({"", "n", "no"})
# At `answer> `, `deny` (or `deny: why`) declines the question, as on the message faces.
_DECLINE = re.compile(r"^deny\b[\s:,;.!-]*(.*)$", re.IGNORECASE | re.DOTALL)


def answer_commands(request: run_pb2.InputRequest, project: str) -> list[str]:
    """The commands that answer `request`, for a person to copy (`project`: its slug or id)."""
    where = f" --project {shlex.quote(project)}" if project else ""
    if request.kind == run_pb2.INPUT_KIND_QUESTION:
        return [
            f"agentmesh answer {request.id} TEXT{where}",
            f"agentmesh deny {request.id}{where} [--reason R]   (decline it)",
        ]
    return [
        f"agentmesh approve {request.id}{where} [--reason R] [--arguments JSON]",
        f"agentmesh deny {request.id}{where} [--reason R]",
    ]


def show_request(console: Console, request: run_pb2.InputRequest) -> None:
    """The request as a person reads it."""
    kind = "approval" if request.kind == run_pb2.INPUT_KIND_APPROVAL else "question"
    who = request.agent or "the agent"
    console.print(
        f"[bold magenta]{escape(who)} asks ({kind}):[/] {escape(asked_text(request))}", soft_wrap=True
    )


def show_how_to_answer(console: Console, request: run_pb2.InputRequest, *, project: str) -> None:
    """The request's id and expiry, and the commands that answer it later."""
    expires = ""
    if request.HasField("expires_at"):
        expires = f", until {request.expires_at.ToDatetime().strftime('%Y-%m-%d %H:%M:%S')} UTC"
    console.print(f"  request {request.id}{expires}; to respond:", soft_wrap=True, highlight=False)
    for command in answer_commands(request, project):
        console.print(f"    {escape(command)}", soft_wrap=True, highlight=False)


def read_response(
    request: run_pb2.InputRequest, read: Callable[[str], str] = input
) -> run_pb2.InputResponse | None:
    """The person's response to `request`, read with `read` (a prompt); None when they leave it
    (end of input, Ctrl-C). An approval: `y` approves; Enter or `n` denies; anything else denies
    with it as the reason (the model is told it). A question: the answer, asked again when empty;
    `deny` (optionally `deny: why`) declines it."""
    try:
        if request.kind == run_pb2.INPUT_KIND_APPROVAL:
            said = read(APPROVE_PROMPT).strip()
            if said.lower() in _YES:
                return run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_APPROVE)
            reason = "" if said.lower() in _NO else said
            return run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_DENY, reason=reason)
        while True:
            answer = read(ANSWER_PROMPT).strip()
            declining = _DECLINE.match(answer)
            if declining is not None:
                return run_pb2.InputResponse(decision=run_pb2.INPUT_DECISION_DENY, reason=declining.group(1))
            if answer:
                return run_pb2.InputResponse(answer=answer)
    except (EOFError, KeyboardInterrupt):
        return None


def settle(
    runner: asyncio.Runner,
    chat: ChatSession,
    outcome: ChatOutcome,
    *,
    interactive: bool,
    read: Callable[[str], str] = input,
) -> ChatOutcome:
    """Answers what the run asks while a person is there to (`interactive`), streaming each
    resumed run, until it ends or asks what nobody answers now; how it ended. The person is
    asked in the calling thread, between the runner's streams, so Ctrl-C there is theirs."""
    console = chat.console
    project = chat.agent.partition("/")[0] if "/" in chat.agent else chat.project_id
    while outcome.suspended:
        request = outcome.suspended[0]
        show_request(console, request)
        response = read_response(request, read) if interactive else None
        if response is None:
            if interactive:
                console.print()
            for index, waiting in enumerate(outcome.suspended):
                if index:
                    show_request(console, waiting)
                show_how_to_answer(console, waiting, project=project)
            return outcome
        try:
            outcome = runner.run(chat.respond(request, response))
        except DomainError as error:
            # Someone else answered first, or it expired: the run goes on without this person.
            console.print(f"[bold red]error:[/] {escape(describe(error))}", soft_wrap=True)
            return ChatOutcome(session_id=outcome.session_id)
    return outcome
