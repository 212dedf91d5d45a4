"""Small builders for protobuf well-known types, shared by every service's convert module."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2


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
