"""Log setup: JSON lines when not on a terminal, each with the current trace and span ids.

Secrets are kept out of logs by never logging them; as a second line of defence every line is
scrubbed of what looks like a bearer token, a JWT or an API key before it is written.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import TextIO

from agentmesh.runtime.telemetry import current_trace_ids

REDACTED = "[REDACTED]"
_SECRET_PATTERN = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]+"  # an Authorization header value
    r"|eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"  # a JWT (header.payload.signature)
    r"|\bsk-[A-Za-z0-9_-]{8,}"  # an OpenAI-style API key
)


def redact(text: str) -> str:
    """`text` with anything that looks like a bearer token, JWT or API key replaced."""
    return _SECRET_PATTERN.sub(REDACTED, text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, trace_id, span_id[, exception]."""

    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = current_trace_ids()
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
            "trace_id": trace_id,
            "span_id": span_id,
        }
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line)


class TextFormatter(logging.Formatter):
    """Human-readable lines for a terminal, with the trace id when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        trace_id, _ = current_trace_ids()
        suffix = f" trace_id={trace_id}" if trace_id else ""
        return redact(super().format(record)) + suffix


def configure_logging(
    level: str = "INFO", *, json_lines: bool | None = None, stream: TextIO | None = None
) -> None:
    """Routes every log record to `stream` (stderr): JSON lines unless it is a terminal."""
    stream = stream or sys.stderr
    if json_lines is None:
        json_lines = not stream.isatty()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        JsonFormatter() if json_lines else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic narrates every start (plugin setup, "Context impl", "Will assume…"); what matters is
    # said once by runtime.database when a migration actually ran.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, root.level))
