"""What model calls cost: the operator's price table (US dollars per million tokens, by the model's
name as agents give it: `openai/gpt-4o-mini`, `mock`), and the usage of one call priced from it.

A model with no price is not free: its calls' cost is unknown, and the usage says so (it names the
model in `Usage.unpriced`) rather than counting it as 0."""

from __future__ import annotations

from dataclasses import dataclass

from agentmesh.executor.providers.base import Usage

_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens. Cached prompt tokens cost `cached_input_per_million_tokens`
    when set, else what other prompt tokens cost."""

    input_per_million_tokens: float = 0.0
    output_per_million_tokens: float = 0.0
    cached_input_per_million_tokens: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        cached = min(cached_input_tokens, input_tokens)
        cached_price = self.cached_input_per_million_tokens
        if cached_price is None:
            cached_price = self.input_per_million_tokens
        return (
            (input_tokens - cached) * self.input_per_million_tokens
            + cached * cached_price
            + output_tokens * self.output_per_million_tokens
        ) / _MILLION


def priced_usage(
    model: str,
    price: Price | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
) -> Usage:
    """One call's usage of `model`, its cost from `price`, or unknown (the model named) without."""
    if price is None:
        return Usage(input_tokens, output_tokens, 0.0, cached_input_tokens, frozenset({model}))
    cost = price.cost(input_tokens, output_tokens, cached_input_tokens)
    return Usage(input_tokens, output_tokens, cost, cached_input_tokens)
