"""Every secret value this executor knows, and scrubbing them from what leaves it.

Model API keys, MCP servers' env and header values, and what `${env:NAME}` references in them
resolve to are added as they become known (when a model or an agent is built); every error text a
model client or an MCP server produces, and every event a run streams or records, is scrubbed of
all of them. One instance per executor, built in `app.py` and handed to whatever holds secrets.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.message import Message

REDACTED = "[redacted]"
# Shorter values are not scrubbed: they are no secrets worth the name (a `DEBUG=1` env value), and
# replacing every "1" would garble every text.
MIN_SECRET_LENGTH = 6
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


class UnsetReference(LookupError):
    """A `${env:NAME}` reference to a variable this executor's environment does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(f"${{env:{name}}} is not set in the executor's environment")
        self.name = name


class Secrets:
    """The secret values known here; `scrub` replaces each with REDACTED, longest first (so a
    value containing another is replaced whole)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, *values: str) -> None:
        fresh = {value for value in values if len(value) >= MIN_SECRET_LENGTH} - self._values
        if not fresh:
            return
        with self._lock:
            self._values |= fresh
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(value) for value in ordered))

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def scrub(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(REDACTED, text)

    def scrub_value(self, value: Any) -> Any:
        """A JSON-like value (str, list, dict) with every string scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {key: self.scrub_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_value(item) for item in value]
        return value

    def scrub_message(self, message: Message) -> None:
        """Scrubs every string of a protobuf message in place (nested messages, lists, maps)."""
        if self._pattern is None:
            return
        for field, value in message.ListFields():
            if field.type == field.TYPE_STRING:
                if field.is_repeated:
                    value[:] = [self.scrub(item) for item in value]
                else:
                    setattr(message, field.name, self.scrub(value))
            elif field.message_type is not None:
                if field.message_type.GetOptions().map_entry:
                    self._scrub_map(value)
                elif field.is_repeated:
                    for item in value:
                        self.scrub_message(item)
                else:
                    self.scrub_message(value)

    def _scrub_map(self, mapping: Any) -> None:
        for key in list(mapping):
            item = mapping[key]
            if isinstance(item, Message):
                self.scrub_message(item)
            elif isinstance(item, str):
                mapping[key] = self.scrub(item)

    def scrubbed_error(self, error: BaseException) -> BaseException:
        """`error` with its message scrubbed (its first argument, as exceptions keep it)."""
        text = str(error)
        clean = self.scrub(text)
        if clean != text:
            error.args = (clean, *error.args[1:])
        return error


def resolve_references(values: Mapping[str, str], environment: Mapping[str, str]) -> dict[str, str]:
    """The values with each `${env:NAME}` replaced by the environment's NAME. UnsetReference
    names the first variable that is not set."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environment:
            raise UnsetReference(name)
        return environment[name]

    return {key: _ENV_REFERENCE.sub(value_of, value) for key, value in values.items()}


def secret_values(*mappings: Mapping[str, str]) -> Iterable[str]:
    for mapping in mappings:
        yield from mapping.values()
