"""Structured logs: JSON lines when not on a terminal, each with the current trace and span ids,
and scrubbed of anything that looks like a token or an API key."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import jwt
import pytest

from agentmesh.runtime import telemetry
from agentmesh.runtime.logging import configure_logging

CANARY_KEY = "sk-canary-0123456789abcdefABCDEF"
CANARY_JWT = jwt.encode(
    {"sub": "canary-user", "typ": "access"}, "canary-secret-" + "x" * 32, algorithm="HS256"
)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Root logging into a string buffer (not a terminal), restored afterwards."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    yield stream
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_every_line_is_json_with_the_current_trace_and_span_ids(spans, log_stream) -> None:
    log = logging.getLogger("agentmesh.test")

    log.info("outside any span")
    with telemetry.tracer().start_as_current_span("work") as span:
        log.warning("inside %s", "a span")

    outside, inside = _lines(log_stream)
    assert outside["message"] == "outside any span"
    assert (outside["trace_id"], outside["span_id"]) == ("", "")
    context = span.get_span_context()
    assert inside["message"] == "inside a span"
    assert inside["level"] == "WARNING"
    assert inside["logger"] == "agentmesh.test"
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")


def test_exceptions_are_part_of_the_json_line(log_stream) -> None:
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("agentmesh.test").exception("failed")

    (line,) = _lines(log_stream)
    assert "ValueError: bad value" in line["exception"]


def test_tokens_and_api_keys_are_scrubbed_from_messages_and_tracebacks(log_stream) -> None:
    log = logging.getLogger("agentmesh.test")

    log.info("calling with authorization: Bearer %s", CANARY_JWT)
    log.info("token %s and key %s", CANARY_JWT, CANARY_KEY)
    try:
        raise RuntimeError(f"provider refused key {CANARY_KEY}")
    except RuntimeError:
        log.exception("model call failed")

    text = log_stream.getvalue()
    assert CANARY_JWT not in text
    assert CANARY_KEY not in text
    assert "[REDACTED]" in text
    assert len(_lines(log_stream)) == 3
