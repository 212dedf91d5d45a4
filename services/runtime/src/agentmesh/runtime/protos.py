"""Small builders and readers for protobuf well-known types, shared by every service's convert
module."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from agentmesh.common.v1 import types_pb2


def struct(values: dict[str, Any]) -> struct_pb2.Struct:
    """A JSON object as a `google.protobuf.Struct`."""
    message = struct_pb2.Struct()
    message.update(values)
    return message


def list_value(items: list[Any]) -> struct_pb2.ListValue:
    """A JSON array as a `google.protobuf.ListValue`."""
    message = struct_pb2.ListValue()
    message.extend(items)
    return message


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    """A datetime (naive: in UTC, as protobuf's `FromDatetime` takes it) as a
    `google.protobuf.Timestamp`. Built from its fields: `FromDatetime` is Python code, and costs
    four times as much (every event carries a time)."""
    since = (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)) - _EPOCH
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86_400 + since.seconds, nanos=since.microseconds * 1000
    )


def struct_to_dict(message: struct_pb2.Struct) -> dict[str, Any]:
    """A `google.protobuf.Struct` as a JSON object, whole numbers as ints."""
    return _whole_numbers(json_format.MessageToDict(message)) if message.fields else {}


def list_to_python(message: struct_pb2.ListValue) -> list[Any]:
    """A `google.protobuf.ListValue` as a JSON array, whole numbers as ints."""
    return _whole_numbers(json_format.MessageToDict(message))


def _whole_numbers(value: Any) -> Any:
    """Struct holds every JSON number as a double: whole ones come back as ints, so
    {"max_tokens": 500} round-trips as 500, not 500.0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def field_value(value: Any) -> Any:
    """A message field's value as plain JSON, as its kind says: a StringList's strings, a Struct
    or ListValue as JSON, a scalar as is."""
    if isinstance(value, types_pb2.StringList):
        return list(value.values)
    if isinstance(value, struct_pb2.Struct):
        return struct_to_dict(value)
    if isinstance(value, struct_pb2.ListValue):
        return list_to_python(value)
    return value


def set_field(message: Message, name: str, value: Any) -> None:
    """Sets field `name` of `message` from plain JSON, as the field's kind says (the inverse of
    `field_value`)."""
    target = getattr(message, name)
    if isinstance(target, types_pb2.StringList):
        target.CopyFrom(types_pb2.StringList(values=value))
    elif isinstance(target, struct_pb2.Struct):
        target.CopyFrom(struct(value))
    elif isinstance(target, struct_pb2.ListValue):
        target.CopyFrom(list_value(value))
    else:
        setattr(message, name, value)


def plain_dict(message: Message) -> dict[str, Any]:
    """A message as the REST API, its server-sent events and the CLI write it (run.proto's
    statement on JSON): proto field names, a oneof's member under its own name, enum values in
    lower case without their type prefix (`INPUT_KIND_QUESTION` is `question`)."""

    def plain_field(descriptor: Any, name: str, value: Any) -> Any:
        field = descriptor.fields_by_name.get(name)
        if field is None:
            return value
        if field.enum_type is not None:
            prefix = _enum_prefix(field.enum_type)
            if isinstance(value, list):
                return [item.removeprefix(prefix).lower() for item in value]
            return value.removeprefix(prefix).lower()
        kind = field.message_type
        if kind is None or kind.full_name.startswith("google.protobuf."):
            return value  # a Struct's keys are data, not fields; timestamps are strings already
        if isinstance(value, list):
            return [plain_message(kind, item) for item in value]
        return plain_message(kind, value)

    def plain_message(descriptor: Any, values: dict[str, Any]) -> dict[str, Any]:
        return {key: plain_field(descriptor, key, item) for key, item in values.items()}

    return plain_message(
        message.DESCRIPTOR, json_format.MessageToDict(message, preserving_proto_field_name=True)
    )


def _enum_prefix(enum: Any) -> str:
    names = [value.name for value in enum.values]
    first = names[0]
    return first[: first.rindex("_") + 1] if first.endswith("_UNSPECIFIED") else ""
