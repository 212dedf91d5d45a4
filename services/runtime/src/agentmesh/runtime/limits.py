"""What any text or JSON value must be for every service and both wire formats to carry it.

protobuf parses messages at most 100 levels deep, and a JSON level inside a `Struct` costs it up
to three (Struct, map entry, Value), so free-form JSON (`model_params`, `mock_responses`) is kept
to `MAX_JSON_DEPTH` levels: deep enough for any real config, shallow enough that the messages
carrying it (an agent inside a response inside a run) still parse on every hop. Text must be
Unicode that UTF-8 can encode: JSON can spell a lone surrogate ("\\ud800"), protobuf cannot
carry one. And no text holds a NUL character: protobuf carries one, but PostgreSQL's text and JSON
cannot store it, and no id, name or message of the mesh needs one (`nul_field`).
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

MAX_JSON_DEPTH = 24

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a UTF-16 surrogate code point, which no UTF-8 text can."""
    return _SURROGATE.search(text) is not None


def json_depth(value: Any, *, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply `value` nests objects and arrays (a scalar is 0), counted no further than
    `limit` + 1, so a hostile value costs no more than a legal one."""
    depth = 0
    level = [value]
    while level and depth <= limit:
        children: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                children.extend(item.values())
            elif isinstance(item, list | tuple):
                children.extend(item)
        if not children and not any(isinstance(item, dict | list | tuple) for item in level):
            break
        depth += 1
        level = children
    return depth


def nul_field(message: Message, prefix: str = "") -> str | None:
    """The path (`project_id`, `policy.project_id`) of the first text holding a NUL character
    among `message`'s own text fields and those of its sub-messages; None when none does. These
    are what a request names things by (ids, names, slugs), which a service looks up before it
    validates anything. Lists, maps and free-form JSON values are content, left to the service
    that validates it with the rest (memory checks each event's content and metadata); walking
    them field by field also cost milliseconds on a batch of events, where this costs
    microseconds."""
    for field, value in message.ListFields():
        if field.is_repeated:
            continue
        path = prefix + field.name
        if field.type == FieldDescriptor.TYPE_STRING and "\x00" in value:
            return path
        if (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and not field.message_type.full_name.startswith("google.protobuf.")
            and (found := nul_field(value, path + "."))
        ):
            return found
    return None
