"""The `openai` provider: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
LM Studio, a LiteLLM proxy) through the official `openai` SDK.

Streams text, tool calls and usage (`stream_options.include_usage`). Rate limits (429), server
errors (5xx), timeouts and connection errors are retried with exponential backoff and jitter
(honouring `Retry-After` up to the backoff cap) while nothing has streamed yet; then the caller
falls back to the next model. The SDK's own retries are off so that this is the one policy.
The API key lives only inside the SDK client: it is never logged, traced or recorded.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from agentmesh.executor.providers.base import (
    Message,
    ModelChunk,
    ModelError,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from agentmesh.executor.providers.pricing import Price, priced_usage
from agentmesh.executor.providers.secrets import Secrets

logger = logging.getLogger(__name__)

# Chat-completions parameters passed as they are; any other model param goes in `extra_body`, so
# servers with their own knobs (Ollama's `num_ctx`, vLLM's `top_k`) get them too.
_REQUEST_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "stop",
        "seed",
        "response_format",
        "parallel_tool_calls",
        "tool_choice",
        "reasoning_effort",
        "logit_bias",
        "user",
        "service_tier",
    }
)
# Model params that configure agentmesh, never sent to the endpoint.
AGENTMESH_PARAMS = frozenset({"function_calling"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed model call is retried before falling back."""

    max_retries: int = 2
    initial_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (1-based): full jitter over an
        exponential bound, or the server's Retry-After when it asks for longer (capped)."""
        bound = min(self.max_backoff_seconds, self.initial_backoff_seconds * 2 ** (attempt - 1))
        wait = random.uniform(bound / 2, bound)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff_seconds))
        return wait


class OpenAIChatModel:
    """A `ChatModel` on one model of one OpenAI-compatible endpoint. Stateless: one instance may
    serve many runs at once."""

    system = "openai"

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        *,
        name: str | None = None,
        params: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        timeout_seconds: float = 120.0,
        price: Price | None = None,
        secrets: Secrets | None = None,
        key_setting: str = "",
    ) -> None:
        self._client = client
        self._model = model
        self.name = name or model
        self._params = {k: v for k, v in (params or {}).items() if k not in AGENTMESH_PARAMS}
        self._retry = retry or RetryPolicy()
        self._timeout_seconds = timeout_seconds
        self._price = price
        # The API key never leaves the executor: every error text is scrubbed of it and of every
        # other secret the executor knows (an endpoint may echo it back), and a refused key is
        # reported by where it is configured.
        self._secrets = secrets or Secrets()
        self._key_setting = key_setting or "the provider's api_key"

    def with_params(self, overrides: Mapping[str, Any]) -> OpenAIChatModel:
        """This model with `overrides` on top of the agent's params, for one run (per-message
        settings): same client, nothing rebuilt."""
        if not overrides:
            return self
        model = copy.copy(self)
        model._params = {**self._params, **overrides}
        return model

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[ModelChunk]:
        request = self._request(messages, tools)
        attempt = 0
        while True:
            yielded = False
            try:
                async for chunk in self._stream_once(request):
                    yielded = True
                    yield chunk
                return
            except ModelError as error:
                attempt += 1
                if not error.retryable or yielded or attempt > self._retry.max_retries:
                    # Once text has reached the caller a retry would repeat it: the error ends the
                    # call (not retryable any more, so no fallback either).
                    raise ModelError(str(error), retryable=error.retryable and not yielded) from error
                wait = self._retry.backoff(attempt, getattr(error, "retry_after", None))
                logger.warning(
                    "model %s failed (%s); retry %d of %d in %.2fs",
                    self.name,
                    error,
                    attempt,
                    self._retry.max_retries,
                    wait,
                )
                await asyncio.sleep(wait)

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self._model,
            "messages": [_message(m) for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self._timeout_seconds,
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        extra = {k: v for k, v in self._params.items() if k not in _REQUEST_PARAMS}
        request.update({k: v for k, v in self._params.items() if k in _REQUEST_PARAMS})
        if extra:
            request["extra_body"] = extra
        return request

    async def _stream_once(self, request: dict[str, Any]) -> AsyncIterator[ModelChunk]:
        calls: dict[int, dict[str, str]] = {}
        usage: Usage | None = None
        response_model = ""
        finish_reason = ""
        try:
            stream = await self._client.chat.completions.create(**request)
            async with stream:
                async for chunk in stream:
                    response_model = chunk.model or response_model
                    if chunk.usage is not None:
                        details = chunk.usage.prompt_tokens_details
                        usage = priced_usage(
                            self.name,
                            self._price,
                            input_tokens=chunk.usage.prompt_tokens or 0,
                            output_tokens=chunk.usage.completion_tokens or 0,
                            cached_input_tokens=(details.cached_tokens or 0) if details else 0,
                        )
                    for choice in chunk.choices[:1]:
                        finish_reason = choice.finish_reason or finish_reason
                        delta = choice.delta
                        if delta is None:
                            continue
                        for call in delta.tool_calls or ():
                            slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                            slot["id"] = call.id or slot["id"]
                            if call.function is not None:
                                slot["name"] += call.function.name or ""
                                slot["arguments"] += call.function.arguments or ""
                        if delta.content:
                            yield ModelChunk(text=delta.content)
        except openai.APIStatusError as error:
            raise self._scrubbed(_status_error(error, self._key_setting)) from None
        except openai.APITimeoutError:
            raise ModelError(f"model {self.name} timed out", retryable=True) from None
        except openai.APIConnectionError as error:
            raise self._scrubbed(
                ModelError(f"cannot reach model {self.name}: {error}", retryable=True)
            ) from None
        except openai.OpenAIError as error:
            raise self._scrubbed(ModelError(f"model {self.name} failed: {error}")) from None
        yield ModelChunk(
            tool_calls=tuple(_tool_call(index, slot) for index, slot in sorted(calls.items())),
            usage=usage,
            response_model=response_model or self._model,
            finish_reason=finish_reason,
            model_name=self.name,
        )

    def _scrubbed(self, error: ModelError) -> ModelError:
        """`error` with every secret the executor knows (the API key among them) replaced."""
        self._secrets.scrubbed_error(error)
        return error


class _RetryableStatus(ModelError):
    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message, retryable=True)
        self.retry_after = retry_after


def _status_error(error: openai.APIStatusError, key_setting: str) -> ModelError:
    status = error.status_code
    if status == 401:
        # What the operator must fix, not the endpoint's words (which may quote the key).
        return ModelError(f"the model endpoint refused the API key configured as {key_setting} (HTTP 401)")
    # The message names the status only: a body may echo request details.
    if status == 429 or status >= 500 or status == 408:
        return _RetryableStatus(f"model endpoint answered HTTP {status}", _retry_after(error))
    return ModelError(f"model endpoint answered HTTP {status}: {_error_message(error)}")


def _error_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if isinstance(message, str):
            return message[:500]
    return type(error).__name__


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _tool_call(index: int, slot: dict[str, str]) -> ToolCallRequest:
    call_id = slot["id"] or f"call_{index}"
    text = slot["arguments"].strip() or "{}"
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        return ToolCallRequest(call_id, slot["name"], {}, error=f"arguments are not valid JSON: {error}")
    if not isinstance(arguments, dict):
        return ToolCallRequest(call_id, slot["name"], {}, error="arguments must be a JSON object")
    return ToolCallRequest(call_id, slot["name"], arguments)


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    payload: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        payload["content"] = message.content or None
        payload["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return payload
