"""Small builders for protobuf well-known types, shared by every service's convert module."""

from __future__ import annotations

from datetime import datetime
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


def timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    """A timezone-aware datetime as a `google.protobuf.Timestamp`."""
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(moment)
    return message
