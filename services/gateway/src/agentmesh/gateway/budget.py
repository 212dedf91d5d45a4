"""A chat's budget, as its caller asks it: the headers (HTTP) or metadata (gRPC)
`x-agentmesh-max-cost` (US dollars) and `x-agentmesh-max-tokens` (input and output), read where
the caller is authorized, on every face, and handed to the chat's run (RunRequest.budget), which
stops with BUDGET_EXCEEDED once it and its delegations have spent it (docs/usage.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from contextvars import ContextVar

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.errors import InvalidRequest

MAX_COST = "x-agentmesh-max-cost"
MAX_TOKENS = "x-agentmesh-max-tokens"

# The budget of the request being served (None: it asks for none).
current_budget: ContextVar[run_pb2.Budget | None] = ContextVar("agentmesh_request_budget", default=None)


def request_budget(headers: Iterable[tuple[str, str | bytes]]) -> run_pb2.Budget | None:
    """The budget the headers ask for; INVALID_ARGUMENT for a value that is not a positive
    number (a whole one for tokens)."""
    budget = run_pb2.Budget()
    for key, raw in headers:
        name = key.lower()
        if name not in (MAX_COST, MAX_TOKENS):
            continue
        value = raw.decode() if isinstance(raw, bytes) else raw
        try:
            number = float(value) if name == MAX_COST else int(value)
        except ValueError:
            number = -1
        if not (number > 0 and math.isfinite(number)):
            rule = "a positive number of US dollars" if name == MAX_COST else "a positive whole number"
            raise InvalidRequest.field(name, f"must be {rule}")
        if name == MAX_COST:
            budget.max_cost = float(number)
        else:
            budget.max_tokens = int(number)
    return budget if budget.max_cost or budget.max_tokens else None
