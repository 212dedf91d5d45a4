"""Log setup: JSON lines when not on a terminal, each with the current trace and span ids."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from agentmesh.runtime.telemetry import current_trace_ids


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = current_trace_ids()
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": trace_id,
            "span_id": span_id,
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        trace_id, _ = current_trace_ids()
        suffix = f" trace_id={trace_id}" if trace_id else ""
        return super().format(record) + suffix


def configure_logging(level: str = "INFO", *, json_lines: bool | None = None) -> None:
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if json_lines else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
